"""docs/spec/ is what the generator writes from the code, and the generator refuses a code
it has no words for."""

from __future__ import annotations

import dataclasses

import pytest

from fleet.asicmon import catalogue as counter_catalogue
from fleet.asicmon import mappings
from fleet.asicmon.catalogue import CATALOGUE, CounterDef
from fleet.asimov.compiler import check_spec
from fleet.asimov.interface import document as spec_doc


def test_committed_docs_equal_the_generators_output():
    assert spec_doc.stale() == [], "run python -m fleet.asimov.interface.document"


def test_check_flags_a_hand_edited_document(tmp_path):
    spec_doc.write(tmp_path)
    assert spec_doc.stale(tmp_path) == []
    path = tmp_path / "interface.md"
    path.write_text(path.read_text().replace("hw.gpu.utilization", "gpu.util"))
    (tmp_path / "error-event.schema.json").unlink()
    assert sorted(spec_doc.stale(tmp_path)) == ["error-event.schema.json", "interface.md"]


def test_a_counter_without_mappings_stops_the_generator(monkeypatch):
    monkeypatch.setitem(CATALOGUE, "widget_total", CounterDef("widget_total", "count", "counter", "Widgets."))
    with pytest.raises(spec_doc.SpecDocError, match="widget_total"):
        spec_doc.documents()


def test_a_row_taken_out_of_the_table_stops_the_generator(monkeypatch):
    monkeypatch.delitem(mappings.MAPPINGS, "power_w")
    with pytest.raises(spec_doc.SpecDocError, match="power_w"):
        spec_doc.documents()


def test_every_counter_appears_with_its_unit_and_names():
    text = spec_doc.interface_md()
    assert text.startswith("# Asicmon accelerator monitoring interface 0.1\n")
    for c in counter_catalogue.CATALOGUE.values():
        assert f"| `{c.name}` | `{mappings.ucum(c.unit)}` | {c.kind} |" in text
    assert "DCGM_FI_DEV_GPU_TEMP" in text and "`hw.gpu.memory.usage`" in text and "mem_usage.used_vram" in text
    assert "| `temperature_c` | `Cel` | gauge | yes |" in text


def test_a_new_event_field_or_rung_without_words_stops_the_generator(monkeypatch):
    monkeypatch.delitem(spec_doc.EVENT_FIELDS, "raw")
    with pytest.raises(spec_doc.SpecDocError, match="raw"):
        spec_doc.interface_md()
    monkeypatch.undo()
    monkeypatch.delitem(spec_doc.RUNGS, "reset_device")
    with pytest.raises(spec_doc.SpecDocError, match="reset_device"):
        spec_doc.interface_md()


def test_event_fields_and_rungs_are_documented():
    text = spec_doc.interface_md()
    for f in dataclasses.fields(spec_doc.ErrorEvent):
        assert f"| `{f.name}` |" in text
    for rung in ("restart_application", "reset_device", "reboot_host", "inspect_hardware"):
        assert f"| `{rung}` |" in text
    assert "| `diagnose` |" in text and "| `reboot` |" in text


def test_ebnf_covers_every_rule_of_the_grammar():
    grammar = spec_doc.GRAMMAR.read_text()
    text = spec_doc.ebnf()
    for name in ("start", "device_stmt", "events_stmt", "expr", "atom", "NUMBER", "STRING"):
        assert f"\n{name} ::= " in "\n" + text
    assert "->" not in text and "//" not in text.replace('"//"', "")
    assert "(arguments)?" in text  # [x] optional became (x)?
    assert grammar.count(":") >= text.count("::=")


def test_ebnf_of_a_small_grammar():
    assert spec_doc.ebnf('start: a [b] _NL*   // c\n?a: "x" -> ex\n  | NAME\n%ignore WS\n') == (
        'start ::= a (b)? NL*\na ::= "x"\n    | NAME\n\n(* between tokens, ignored: WS *)')


def test_the_example_validates():
    assert check_spec(spec_doc.EXAMPLE, "example.asimov") == []


def test_the_check_command_passes_on_the_committed_docs(capsys):
    assert spec_doc.main(["--check"]) == 0
    assert capsys.readouterr().err == ""

"""The JSON Schemas of docs/spec/ hold what the code makes: the catalogue document, error
events as the classifier fills them, the shipped error catalogues, every shipped spec's
metadata; and they refuse what the code refuses."""

from __future__ import annotations

import json

import jsonschema
import pytest

from fleet.asicmon.errors.catalogue import CATALOGUE_DIR, Catalogue, classify
from fleet.asicmon.errors.events import ErrorEvent
from fleet.asimov.compiler import check_file, check_spec
from fleet.asimov.interface.document import SPEC_DIR
from fleet.asimov.interface.schemas import counters_document, schemas, spec_metadata
from fleet.asimov.loader import SPECS_DIR


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SPEC_DIR / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == schemas()[name]  # the published schema is the code's
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, instance) -> list[str]:
    return [e.message for e in validator.iter_errors(instance)]


def test_the_counter_catalogue_document_validates():
    v = _validator("counter-catalogue")
    assert _errors(v, counters_document()) == []
    assert _errors(v, json.loads((SPEC_DIR / "counters.json").read_text())) == []
    doc = counters_document()
    doc["counters"][0]["kind"] = "histogram"
    assert any("histogram" in m for m in _errors(v, doc))
    del doc["counters"][1]["names"]
    assert any("'names' is a required property" in m for m in _errors(v, doc))


def test_classified_and_unclassified_events_validate():
    v = _validator("error-event")
    event = ErrorEvent("nvidia", "79", "GPU has fallen off the bus.", 1_700_000_000.0, raw="NVRM: Xid ...", pid=12)
    assert _errors(v, event.as_dict()) == []
    classify(event)
    assert event.action == "reboot_host"
    assert _errors(v, event.as_dict()) == []
    bad = dict(event.as_dict(), action="explode", count=0)
    assert len(_errors(v, bad)) == 2
    assert any("'time' is a required property" in m for m in _errors(v, {"vendor": "amd", "code": "x", "detail": ""}))


def test_shipped_error_catalogues_validate_and_a_bad_action_is_refused_by_both():
    v = _validator("error-catalogue")
    paths = sorted(CATALOGUE_DIR.glob("*.json"))
    assert paths
    for path in paths:
        assert _errors(v, json.loads(path.read_text())) == [], path.name
    data = json.loads(paths[0].read_text())
    code = next(iter(data["codes"]))
    data["codes"][code]["action"] = "pray"
    assert any("pray" in m for m in _errors(v, data))
    with pytest.raises(ValueError, match="unknown action"):
        Catalogue("broken", data)


def test_every_shipped_specs_metadata_validates():
    v = _validator("spec-metadata")
    paths = sorted(SPECS_DIR.glob("*.asimov"))
    assert len(paths) >= 5
    for path in paths:
        meta = spec_metadata(check_file(path))
        assert _errors(v, meta) == [], path.name
    assert spec_metadata(check_file(SPECS_DIR / "gpu.asimov"))["actions"] == ["reboot"]
    meta = dict(spec_metadata(check_file(SPECS_DIR / "gpu.asimov")), counters=["not_a_counter"])
    assert _errors(v, meta)


def test_the_metadata_schema_names_the_counters_the_checker_accepts():
    v = _validator("spec-metadata")
    spec = 'device x\nt: mC = file("t", int)\nstats.temperature_c = convert(t, "C")\n'
    assert check_spec(spec, "x.asimov") == []
    spec_bad = spec.replace("temperature_c", "driver_status")
    assert check_spec(spec_bad, "x.asimov")  # a runtime counter: the checker refuses it ...
    meta = {"device": "x", "counters": ["driver_status"], "actions": [], "events": None, "diagnose": []}
    assert _errors(v, meta)  # ... and so does the schema

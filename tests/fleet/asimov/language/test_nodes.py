"""The compiler's stages: the typed tree the parser builds (named parts, positions), the
checked result code generation reads without changing it, and the defects the reshaping
brought to light (each reproduced here: they crashed or generated broken code before)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from lark import Lark, Tree

from fleet.asimov.checking.checker import check
from fleet.asimov.codegen import emit
from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.language import nodes
from fleet.asimov.language.parser import GRAMMAR, _BracketNewlines, parse
from fleet.asimov.loader import SPECS_DIR, monitor_class_from_text
from fleet.hosts.local import FileRoot

T0 = 1_700_000_000.0


def _walk(node):
    yield node
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        for part in value if isinstance(value, tuple) else (value,):
            if isinstance(part, nodes.Node):
                yield from _walk(part)


def test_the_parser_builds_typed_nodes_with_named_parts_and_positions():
    spec = parse(
        "device x\nonce h, _: mW = lib.open(index, out, out)\nstats.power_w = (h + 1) * 2\n"
    )
    device, read, stat = spec.statements
    assert isinstance(device, nodes.Device) and device.name.text == "x"
    assert isinstance(read, nodes.Binding) and read.once
    assert [t.text for t in read.targets] == ["h", "_"]
    assert (read.targets[1].line, read.targets[1].column) == (2, 9)
    assert read.annotation.unit.text == "mW" and (read.annotation.line, read.annotation.column) == (
        2,
        10,
    )
    assert read.value.lib_function == "open" and read.value.out_count == 2
    assert isinstance(stat, nodes.StatsAssign) and stat.counter.text == "power_w"
    product = stat.value
    assert isinstance(product, nodes.BinOp) and product.op == "*"
    # a node starts at the bracket around its first part, as lark's positions do; the part
    # inside the brackets keeps its own place
    assert product.span == nodes.Span(3, 17, 3, 28)
    assert product.left.span == nodes.Span(3, 18, 3, 23)
    assert isinstance(product.left.left, nodes.Name) and product.left.left.id == "h"


def _lark_spans(tree, out, parent=None):
    """Spans of lark's own parse tree with positions, for the rules that are nodes."""
    if isinstance(tree, Tree):
        if tree.data not in ("targets", "arguments", "start") and parent != "once_stmt":
            m = tree.meta
            out[(m.line, m.column, m.end_line, m.end_column)] += 1
        for child in tree.children:
            _lark_spans(child, out, tree.data)
    return out


def _node_spans(spec):
    out = Counter()
    for node in _walk(spec):
        if not isinstance(node, (nodes.Ident, nodes.Spec)):
            out[(node.span.line, node.span.column, node.span.end_line, node.span.end_column)] += 1
        if isinstance(node, (nodes.ErrorCode, nodes.Diagnose)):  # its string is a token to lark
            token = node.status if isinstance(node, nodes.ErrorCode) else node.command
            out[(token.span.line, token.span.column, token.span.end_line, token.span.end_column)] -= 1
    return +out


def test_every_node_spans_what_lark_positions_would_give_it():
    lark = Lark(
        GRAMMAR.read_text(),
        parser="lalr",
        postlex=_BracketNewlines(),
        propagate_positions=True,
        maybe_placeholders=True,
    )
    texts = [path.read_text() for path in sorted(SPECS_DIR.glob("*.asimov"))]
    texts.append(
        "device x\nonce a, b = lib.f(((index)), out, out)\nstats.core_count = ((a) + -b) * [c for c in (range(2))][0]\n"
    )
    for text in texts:
        assert _node_spans(parse(text)) == _lark_spans(lark.parse(text), Counter())


def test_a_shipped_spec_becomes_a_tree_of_frozen_nodes_only():
    for path in sorted(SPECS_DIR.glob("*.asimov")):
        spec = parse(path.read_text(), str(path))
        for node in _walk(spec):
            for f in dataclasses.fields(node):
                value = getattr(node, f.name)
                parts = value if isinstance(value, tuple) else (value,)
                assert all(
                    isinstance(p, (nodes.Node, nodes.Span, str, int, float, bool, type(None)))
                    for p in parts
                ), (
                    type(node).__name__,
                    f.name,
                    value,
                )
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.statements[0].name = "other"


def test_emitting_twice_gives_the_same_module_and_leaves_the_checked_spec_as_it_was():
    text = (SPECS_DIR / "video.asimov").read_text()
    checked = check(parse(text, "video.asimov"), text, "video.asimov")
    facts = dict(checked.facts)
    first, second = emit(checked), emit(checked)
    assert first == second == compile_spec(text, "video.asimov").code
    assert dict(checked.facts) == facts
    with pytest.raises(TypeError):
        checked.facts[checked.statements[0]] = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.counters = ()


def _errors(text: str) -> str:
    return "\n".join(str(e) for e in check_spec(text, "x.asimov"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "device x\nconst A = 0x_\n",
            "x.asimov:2:11: error: bad number '0x_'\n    const A = 0x_\n              ^\n  expected hex digits after 0x",
        ),
        (
            'device x\nconst A = "a\\x4"\n',
            'x.asimov:2:11: error: bad escape in string: truncated \\xXX escape\n    const A = "a\\x4"\n              ^\n'
            '  expected an escape such as \\n, \\t, \\x41 or \\u00b0 (or a raw string, r"...")',
        ),
        (
            'device x\nt = file("t", int)\nstats.throttle_reasons = flags(t, {index: "a", 2: "b"})\n',
            "x.asimov:3:35: error: flags() needs a constant {bit: name} dictionary\n"
            '    stats.throttle_reasons = flags(t, {index: "a", 2: "b"})\n'
            "                                      ^\n"
            '  expected {0x1: "thermal", 0x2: "power"}',
        ),
        (
            'device x\nt = file("t", int)\nstats.throttle_reasons = flags(t, {{1: "a"}: "b"})\n',
            "x.asimov:3:36: error: a dictionary key cannot be a dictionary\n"
            '    stats.throttle_reasons = flags(t, {{1: "a"}: "b"})\n'
            "                                       ^\n"
            "  expected a number or a string",
        ),
    ],
    ids=["bad_hex_number", "bad_escape", "dict_not_constant_after_a_name", "dict_key_unhashable"],
)
def test_literals_python_cannot_read_are_errors_with_line_and_column(text, expected):
    assert _errors(text) == expected


class _Lib:
    def __init__(self):
        self.total = 0
        self.reported = []

    def dev_value(self):
        self.total += 50
        return self.total

    def dev_report(self, rate):
        self.reported.append(rate)


def test_a_rate_in_a_call_statement_is_updated_before_the_call():
    spec = "device x\nv = lib.dev_value()\nlib.dev_report(rate(v))\nstats.core_count = 1\n"
    lib = _Lib()
    monitor = monitor_class_from_text(spec, "x.asimov")(lib=lib)
    assert monitor.refresh(T0)["driver_status"] == "ok"
    assert monitor.refresh(T0 + 10)["driver_status"] == "ok"
    assert lib.reported == [None, 5.0]


def test_a_file_parser_argument_is_kept_as_written(tmp_path):
    (tmp_path / "status").write_text("TEXT 42\n")
    spec = 'device x\nn = file("status", field("TEXT", int))\nstats.core_count = n\n'
    monitor = monitor_class_from_text(spec, "x.asimov")(files=FileRoot(tmp_path))
    assert monitor.refresh(T0)["core_count"] == 42

"""Building the typed tree from lark's parse: literals read as Python would read them, each
node with the span of the text it came from."""

from fleet.asimov.language import nodes
from fleet.asimov.language.parser import parse


def _constants(*values: str) -> list:
    text = "device x\n" + "".join(f"const C{i} = {v}\n" for i, v in enumerate(values))
    return [statement.value for statement in parse(text).statements[1:]]


def test_numbers_read_hex_underscores_and_exponents_and_keep_their_text():
    hex_, grouped, exponent = _constants("0x1F", "1_000", "2.5e3")
    assert (hex_.value, hex_.text) == (31, "0x1F")
    assert grouped.value == 1000 and isinstance(grouped.value, int)
    assert exponent.value == 2500.0 and isinstance(exponent.value, float)


def test_strings_read_escapes_unless_raw():
    escaped, raw = _constants('"a\\tb"', 'r"a\\d"')
    assert escaped.value == "a\tb"
    assert raw.value == "a\\d"


def test_keywords_and_signs_become_their_own_nodes():
    minus, true, none = _constants("-3", "True", "None")
    assert isinstance(minus, nodes.Neg) and minus.operand.value == 3
    assert isinstance(true, nodes.Boolean) and true.value is True
    assert isinstance(none, nodes.NoneLiteral)


def test_a_call_knows_its_library_function_and_out_parameters():
    spec = parse("device x\na, b = lib.dev_pair(index, out, out)\n")
    binding = spec.statements[1]
    assert [t.text for t in binding.targets] == ["a", "b"]
    assert binding.value.lib_function == "dev_pair" and binding.value.out_count == 2
    assert binding.value.span == nodes.Span(2, 8, 2, 37)

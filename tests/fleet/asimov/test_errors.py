"""How Asimov reports an error: file, line and column, the line with a caret under the spot,
what was expected; and all of a spec's errors in source order with their count."""

from fleet.asimov.errors import AsimovError, SpecErrors


def test_an_error_shows_its_line_with_a_caret_under_the_column():
    error = AsimovError("unknown name 'tt'", "x.asimov", 3, 5, "t =\ttt\n", "a name defined above")
    assert str(error) == (
        "x.asimov:3:5: error: unknown name 'tt'\n"
        "    t = tt\n"  # a tab is one column, as the column counts it
        "        ^\n"
        "  expected a name defined above"
    )
    assert (
        str(AsimovError("unexpected end of file", "x.asimov", 1, 1))
        == "x.asimov:1:1: error: unexpected end of file"
    )


def test_a_spec_s_errors_are_sorted_by_place_and_counted():
    late = AsimovError("b", "x.asimov", 4, 2)
    early = AsimovError("a", "x.asimov", 2, 9)
    errors = SpecErrors([late, early])
    assert errors.errors == [early, late]
    assert str(errors).splitlines() == [
        "x.asimov:2:9: error: a",
        "x.asimov:4:2: error: b",
        "2 errors",
    ]
    assert str(SpecErrors([early])).endswith("\n1 error")


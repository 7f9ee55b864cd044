"""The checking tables see the checker through `CheckerInterface` only: the `Checker` class
has all it names, and no table reads anything of the checker the interface does not name."""

import ast
import typing
from pathlib import Path

import pytest

from fleet.asimov.checking.checker import Checker, check
from fleet.asimov.checking.interface import CheckerInterface
from fleet.asimov.errors import SpecErrors
from fleet.asimov.language.parser import parse

ROOT = Path(__file__).resolve().parents[4]


def _tables() -> list[Path]:
    """The modules typed against the interface (the statement, expression and built-in tables...)."""
    return [
        path
        for path in sorted((ROOT / "fleet" / "asimov").rglob("*.py"))
        if "from fleet.asimov.checking.interface import CheckerInterface" in path.read_text()
    ]


def _members() -> set[str]:
    names = set(typing.get_type_hints(CheckerInterface, include_extras=False))
    return names | {n for n, v in vars(CheckerInterface).items() if callable(v) and not n.startswith("_")}


def test_the_checker_class_is_a_checker_interface():
    c = Checker("", "gpu.asimov")
    assert isinstance(c, CheckerInterface)
    missing = sorted(name for name in _members() if not hasattr(c, name))
    assert not missing, f"Checker lacks {missing}"


def test_an_object_without_the_checker_s_state_is_not_one():
    assert not isinstance(object(), CheckerInterface)


def test_the_tables_read_only_what_the_interface_names():
    tables = _tables()
    assert len(tables) >= 12, [p.name for p in tables]  # statements, expressions, builtins, ... state
    members = _members()
    outside = set()
    for path in tables:
        for node in ast.walk(ast.parse(path.read_text())):
            is_checker = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "c"
            if is_checker and node.attr not in members:
                outside.add(f"{path.name}: c.{node.attr}")
    assert not outside, f"tables reach past CheckerInterface: {sorted(outside)}"
    assert "checker" not in {p.stem for p in tables}


def test_a_spec_checked_through_the_tables_still_says_what_is_wrong():
    text = 'device x\nt = file("t", int)\nstats.power_w = t + undefined_name\n'
    with pytest.raises(SpecErrors) as raised:  # the expression table reports through the interface
        check(parse(text, "x.asimov"), text, "x.asimov")
    assert "x.asimov:3:" in str(raised.value)
    assert "unknown name 'undefined_name'" in str(raised.value)

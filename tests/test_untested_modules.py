"""Tests mirror the source tree: the tests of `fleet/polling/poller.py` are in
`tests/fleet/polling/test_poller.py`. The modules with no such file are listed in
tests/untested_modules.txt, and that list may only shrink: a new module arrives with its test
file, and a module that gains one leaves the list. Scenarios that cross modules are in
tests/scenarios/ (and the browser tier in tests/browser/); they do not count here."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dashboard", "fleet", "traces", "emulator")
LIST = ROOT / "tests" / "untested_modules.txt"
NOT_MODULES = ("__init__.py", "__main__.py")


def _source_modules() -> list[Path]:
    return sorted(
        path.relative_to(ROOT)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.name not in NOT_MODULES and "migrations" not in path.parts and not path.name.endswith("_pb2.py")
    )


def _test_file(module: Path) -> Path:
    """Where the tests of a source module are."""
    return Path("tests", *module.parts[:-1], f"test_{module.name}")


def test_a_module_s_tests_are_where_a_newcomer_would_look():
    assert _test_file(Path("fleet/polling/poller.py")) == Path("tests/fleet/polling/test_poller.py")
    assert (ROOT / _test_file(Path("fleet/polling/poller.py"))).exists()
    assert Path("fleet/polling/poller.py") in _source_modules()


def test_the_list_of_untested_modules_only_shrinks():
    untested = {str(m) for m in _source_modules() if not (ROOT / _test_file(m)).exists()}
    listed = {line.strip() for line in LIST.read_text().splitlines() if line.strip() and not line.startswith("#")}
    new = sorted(untested - listed)
    assert not new, f"modules without tests/<package>/.../test_<module>.py (write one; do not list them): {new}"
    tested = sorted(listed - untested)
    assert not tested, f"these have a test file now (or are gone): remove them from {LIST.name}: {tested}"

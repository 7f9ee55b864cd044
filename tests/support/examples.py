"""How many examples a property test tries, by Hypothesis profile (tests/conftest.py loads one):
under `ci` (what `make test` and CI run) as many as the test asks for, under `fast` (the
default, `make test-fast`) a quarter of them, at least 5."""

from hypothesis import settings


def examples(wanted: int) -> int:
    if settings.get_current_profile_name() == "ci":
        return wanted
    return max(5, wanted // 4)

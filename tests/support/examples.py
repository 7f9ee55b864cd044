"""How many examples a property test tries, by Hypothesis profile (tests/conftest.py loads one):
under `ci` (what `make test` and CI run) as many as the test asks for, under `fast` (the
default, `make test-fast`) a quarter of them, at least 5. A sweep over a grid of cases
(`spread`) likewise: every case under `ci`, a few spread over the grid under `fast`."""

from hypothesis import settings


def examples(wanted: int) -> int:
    if settings.get_current_profile_name() == "ci":
        return wanted
    return max(5, wanted // 4)


def spread(cases: list, fast: int) -> list:
    """Every case under `ci`; under `fast`, `fast` of them spread evenly, first and last kept."""
    if settings.get_current_profile_name() == "ci" or fast >= len(cases):
        return list(cases)
    if fast < 2:
        return list(cases[:fast])
    step = (len(cases) - 1) / (fast - 1)
    return [cases[round(i * step)] for i in range(fast)]

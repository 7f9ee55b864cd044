"""Durations for people: "55 min 53 s", not "3353 s" (Django-free).

`human_duration` is the one formatter of ages and durations the server shows: health
reasons (no data for …, out of memory in …), an agent's silence, remediation outcomes, trace
timeouts, and the ``duration`` template filter. The pages' scripts show the server's text.
"""

UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def human_duration(seconds: float) -> str:
    """The two largest units that are not zero: "42 s", "1 min 5 s", "2 h", "3 d 4 h";
    under 10 s with a tenth where it is not whole ("2.5 s")."""
    if seconds < 0:
        return f"-{human_duration(-seconds)}"
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    left = round(seconds)
    parts = []
    for name, size in UNITS:
        count, left = divmod(left, size)
        if count or parts:
            parts.append((count, name))
        if len(parts) == 2:
            break
    return " ".join(f"{count} {name}" for count, name in parts if count)

"""Exact times: decimal microseconds (as written in the JSON text) to integer nanoseconds.

Chrome and Kineto traces write times in microseconds, usually with three decimals
(``1695835535123.456``) and often as epoch times around 1.7e15 us. A float64 holds such a
number only to about 0.25 us, so parsing it as a float and multiplying by 1000 moves starts
and ends by up to 128 ns, enough to break the nesting of back-to-back slices. These helpers
work on the number's text instead and are exact: integer part and decimals are digits,
combined in int64 arithmetic. More than three decimals are rounded to the nearest
nanosecond (ties to even), like :func:`round` on the exact decimal value.

The bulk path (:func:`us_texts_to_ns`) checks a whole batch with numpy (only digits and
at most one point per number, at most three decimals) and converts the digits as one
JSON array of integers, epoch microseconds (16 integer digits) included; a batch with
anything else (exponents, signs, numbers from 9e15 us up, more decimals) goes through
:func:`us_text_to_ns`, one number at a time, with Python's exact decimals.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

import msgspec
import numpy as np

_INTEGERS = msgspec.json.Decoder(list[int])
# Epoch microseconds have 16 integer digits (1.7e15 us). Every 16-digit number below 9e15 us
# (9e18 ns) fits int64 with three decimals; one from 9e15 up may not, so it takes the slow,
# checked path.
_MAX_INT_DIGITS = 16
_NINE = ord("9")
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_NS = Decimal(1000)


class NotANumber(ValueError):
    """A time field holds something other than a JSON number."""


def us_text_to_ns(text) -> int:
    """One JSON number of microseconds (its text: str or bytes-like) to integer ns, exactly."""
    if not isinstance(text, str):
        text = bytes(text).decode("ascii", "replace")
    text = text.strip()
    if not text or text[0] not in "-0123456789":
        raise NotANumber(text or "nothing")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise NotANumber(text) from None
    if not value.is_finite():
        raise NotANumber(text)
    return int((value * _NS).to_integral_value(rounding=ROUND_HALF_EVEN))


def us_to_ns(value: float | int | str) -> int:
    """A time already decoded by a JSON parser (int, float or numeric text) to ns.

    Floats are taken by their shortest decimal representation (``repr``), which is the text
    they were parsed from whenever that text had at most 17 significant digits.
    """
    if isinstance(value, bool):
        raise NotANumber(repr(value))
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        return us_text_to_ns(repr(value))
    if isinstance(value, str):
        return us_text_to_ns(value)
    raise NotANumber(repr(value))


def us_texts_to_ns(texts: list) -> np.ndarray:
    """Many JSON number texts (bytes-like) of microseconds to an int64 array of ns.

    Raises :class:`NotANumber` with ``args[1]`` set to the index of the first text that is
    not a number (an empty text means the field was missing).
    """
    n = len(texts)
    if not n:
        return np.zeros(0, np.int64)
    blob = b",".join(texts)
    fast = _same_layout(blob, n)
    if fast is None:
        fast = _common_case(blob, n)
    if fast is not None:
        return fast
    out = np.zeros(n, np.int64)
    for k, text in enumerate(texts):
        try:
            out[k] = us_text_to_ns(text)
        except NotANumber as exc:
            raise NotANumber(exc.args[0], k) from None
        except OverflowError:
            raise NotANumber(f"{bytes(text)[:40]!r} is out of range", k) from None
    return out


def _same_layout(blob: bytes, n: int) -> np.ndarray | None:
    """All texts of one layout (the same width, the point in the same place, at most three
    decimals, digits otherwise), as most batches are: their ns, from the digits as a
    matrix, one row per text. None when they are not so.

    ``blob`` is the texts joined by commas.
    """
    width = (len(blob) + 1) // n  # a text and its comma
    if width * n != len(blob) + 1 or not 2 <= width <= _MAX_INT_DIGITS + 5:
        return None
    arr = np.frombuffer(blob, np.uint8)
    if (arr[width - 1 :: width] != _COMMA).any():
        return None
    rows = np.lib.stride_tricks.as_strided(arr, (n, width - 1), (width, 1), writeable=False)
    dot = rows[0].tobytes().find(b".")
    decimals = 0 if dot < 0 else width - 2 - dot
    int_digits = width - 1 - (dot >= 0) - decimals
    if dot == 0 or decimals > 3 or int_digits > _MAX_INT_DIGITS:
        return None
    if int_digits == _MAX_INT_DIGITS and (rows[:, 0] >= _NINE).any():
        return None
    if dot >= 0:
        if (rows[:, dot] != _DOT).any():
            return None
        rows = np.concatenate([rows[:, :dot], rows[:, dot + 1 :]], axis=1)
    digits = rows.astype(np.int64) - _ZERO
    if ((digits < 0) | (digits > 9)).any():
        return None
    return digits @ _POW10[rows.shape[1] - 1 :: -1] * _POW10[3 - decimals]


def _common_case(blob: bytes, n: int) -> np.ndarray | None:
    """All texts plain decimals (digits, at most one '.', at most three decimals): their ns.

    ``blob`` is the texts joined by commas. None when any text is something else.
    """
    arr = np.frombuffer(blob, np.uint8)
    if not _PLAIN[arr].all():
        return None
    commas = np.flatnonzero(arr == _COMMA)
    if len(commas) != n - 1:
        return None
    ends = np.append(commas, len(arr))
    starts = np.concatenate([[0], commas + 1])
    if (ends <= starts).any():
        return None  # an empty text: a missing field
    dots = np.flatnonzero(arr == _DOT)
    owner = np.searchsorted(ends, dots)
    per_text = np.bincount(owner, minlength=n)
    if (per_text > 1).any() or (dots == starts[owner]).any():
        return None
    decimals = np.zeros(n, np.int64)
    decimals[owner] = ends[owner] - dots - 1
    int_digits = ends - starts - decimals - (per_text > 0)
    if (decimals > 3).any() or (int_digits > _MAX_INT_DIGITS).any():
        return None
    if (arr[starts[int_digits == _MAX_INT_DIGITS]] >= _NINE).any():
        return None
    digits = blob.replace(b".", b"") if len(dots) else blob
    try:  # the digits as one JSON array of integers, parsed in C
        values = np.array(_INTEGERS.decode(b"[" + digits + b"]"), np.int64)
    except msgspec.DecodeError:  # leading zeros ("0.5" gives "05") are not JSON
        values = np.fromiter(map(int, digits.split(b",")), np.int64, n)
    return values * _POW10[3 - decimals]


_PLAIN = np.zeros(256, bool)
_PLAIN[[ord(c) for c in "0123456789.,"]] = True
_COMMA, _DOT, _ZERO = ord(","), ord("."), ord("0")


def ns_to_us_text(value: int) -> bytes:
    """Integer nanoseconds as the exact JSON text of microseconds (three decimals)."""
    sign = b"-" if value < 0 else b""
    whole, frac = divmod(abs(int(value)), 1000)
    return b"%s%d.%03d" % (sign, whole, frac) if frac else b"%s%d" % (sign, whole)

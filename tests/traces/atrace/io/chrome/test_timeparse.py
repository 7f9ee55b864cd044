"""Exact time parsing: JSON microsecond texts to integer nanoseconds."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traces.atrace import read_trace
from traces.atrace.io.chrome import timeparse
from traces.atrace.io.chrome.timeparse import (
    NotANumber,
    ns_to_us_text,
    us_text_to_ns,
    us_texts_to_ns,
)


def test_epoch_microseconds_keep_every_nanosecond():
    # 1695835535123.457 us is 1695835535123457 ns; float64 arithmetic gives ...456 or ...458.
    texts = [b"1695835535123.457", b"4458676522690.655", b"2241346141019.8", b"12", b"0.001"]
    assert us_texts_to_ns(texts).tolist() == [1695835535123457, 4458676522690655, 2241346141019800, 12000, 1]


def test_other_number_forms_go_through_the_exact_slow_path():
    assert us_texts_to_ns([b"1.5e3", b"-2.25", b"0.0015", b"0.0025"]).tolist() == [1_500_000, -2250, 2, 2]


@pytest.mark.parametrize("bad", [b'"12"', b"", b"null", b"true", b"[1]"])
def test_anything_but_a_number_is_refused_with_its_index(bad):
    with pytest.raises(NotANumber) as info:
        us_texts_to_ns([b"1.000", bad])
    assert info.value.args[1] == 1


@given(st.integers(min_value=-(10**17), max_value=10**18))
def test_text_round_trip(value):
    text = ns_to_us_text(value)
    assert us_text_to_ns(text) == value
    assert us_texts_to_ns([text]).tolist() == [value]
    assert Decimal(text.decode()) * 1000 == value


@given(st.lists(st.tuples(st.integers(0, 10**15), st.integers(0, 999), st.integers(0, 3)), min_size=1, max_size=50))
def test_bulk_parse_equals_decimal_arithmetic(parts):
    texts = []
    for whole, frac, decimals in parts:
        digits = f"{frac:03d}"[:decimals]
        texts.append(f"{whole}.{digits}".encode() if decimals else str(whole).encode())
    expected = [int(Decimal(t.decode()) * 1000) for t in texts]
    assert us_texts_to_ns(texts).tolist() == expected


@pytest.mark.parametrize(
    "texts",
    [
        [b"1695835542514261", b"1695835542515301"],  # epoch us, as older Kineto traces write them
        [b"1779999999999999.125", b"1780000000000000.5"],  # epoch us with decimals (our captures)
        [b"1695835542514261", b"12.5", b"8999999999999999.999"],  # mixed widths
    ],
)
def test_epoch_microseconds_of_sixteen_digits_take_the_bulk_path(texts, monkeypatch):
    # Real traces (A100 AlexNet, multirank, simple_add) and the emulator's captures write
    # 16-digit epoch microseconds: the bulk path takes them, not one Decimal per event.
    def one_at_a_time(text):
        raise AssertionError(f"{text!r} went through the slow path")

    monkeypatch.setattr(timeparse, "us_text_to_ns", one_at_a_time)
    assert us_texts_to_ns(texts).tolist() == [int(Decimal(t.decode()) * 1000) for t in texts]


@pytest.mark.parametrize("big", [b"9223372036854776", b"9999999999999999.5", b"12345678901234567"])
def test_times_past_int64_nanoseconds_are_refused_not_wrapped(big):
    with pytest.raises(NotANumber, match="out of range") as info:
        us_texts_to_ns([b"1.5", big])
    assert info.value.args[1] == 1


@given(st.lists(st.tuples(st.integers(0, 9 * 10**15), st.integers(0, 999), st.integers(0, 3)), max_size=20))
def test_bulk_parse_of_sixteen_digit_times_equals_decimal_arithmetic(parts):
    texts = [
        f"{whole}.{f'{frac:03d}'[:decimals]}".encode() if decimals else str(whole).encode()
        for whole, frac, decimals in parts
    ]
    assert us_texts_to_ns(texts).tolist() == [int(Decimal(t.decode()) * 1000) for t in texts]


def test_back_to_back_children_nest_at_epoch_times():
    # Three slices that touch exactly: with float64 times the child's end moved past the
    # parent's end and the next sibling started inside the previous one.
    doc = b"""{"traceEvents": [
      {"ph": "X", "name": "parent", "pid": 1, "tid": 1, "ts": 1695835535123.455, "dur": 0.004},
      {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1695835535123.455, "dur": 0.002},
      {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1695835535123.457, "dur": 0.002}]}"""
    trace = read_trace(doc)
    parent, _ = trace.nesting()
    assert trace.ts.tolist() == [1695835535123455, 1695835535123455, 1695835535123457]
    assert parent.tolist() == [-1, 0, 0]


def test_a_slice_that_outlives_its_parent_keeps_the_nesting_of_later_slices():
    # 'step' begins inside 'enter' and ends long after; 'op' (after 'enter' ended) is in 'step'.
    doc = b"""[{"ph": "X", "name": "enter", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
      {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 5, "dur": 100},
      {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 20, "dur": 10}]"""
    trace = read_trace(doc)
    parent, depth = trace.nesting()
    names = trace.names()
    assert {names[i]: (names[p] if p >= 0 else None) for i, p in enumerate(parent.tolist())} == {
        "enter": None, "step": "enter", "op": "step"}
    assert depth[names.index("op")] == 2
    assert np.all(trace.dur >= 0)

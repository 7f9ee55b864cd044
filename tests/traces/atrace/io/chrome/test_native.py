"""The event scanner in C: built, and giving exactly the msgspec path's batch or declining."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from dataclasses import fields

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.traces import each_real_trace
from tests.traces.atrace import exact
from tests.traces.atrace.io.chrome.test_parallel import fingerprint
from traces.atrace import read_trace
from traces.atrace.io.chrome import batch as chrome_batch
from traces.atrace.io.chrome import native
from traces.atrace.io.chrome import reader as chrome_reader
from traces.atrace.io.chrome.batch import Batch, decode_batch, parse_batch


def _same(a, b) -> bool:
    """Whether two batch parts hold the same values (arrays by value and type)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
        )
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _scanned(text: bytes) -> Batch | None:
    return chrome_batch._scanned(text, native.scan(text))


def _decoded(text: bytes) -> Batch | None:
    """The msgspec path's batch, or None where it refuses the text or finds a problem."""
    try:
        batch = decode_batch(text)
    except Exception:  # noqa: BLE001 - any refusal: the scanner must decline too
        return None
    return None if batch.x is not None and batch.x.error is not None else batch


def test_the_scanner_is_built_here():
    assert native.scan is not None, "Atrace's event scanner is not built: run `make .venv/.dev` (needs a C compiler)"


def test_the_build_command_makes_a_scanner_that_reads_a_batch(tmp_path):
    out = tmp_path / native.built_path().name
    subprocess.run(native.build_command(out), check=True)
    spec = importlib.util.spec_from_file_location(native.MODULE, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = b'[{"ph": "X", "name": "k", "ts": 1.5, "dur": 2}, {"ph": "M"}]'
    n, x, _flows, others = module.scan(text)
    start = text.index(b'{"ph": "M"}')
    assert n == 2 and x[1] == [("k", "", 0, 0)] and others == [(1, start, start + 11)]


def test_the_scanner_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(native.ENV_DISABLE, "1")
    assert native.load() is None
    monkeypatch.delenv(native.ENV_DISABLE)
    assert native.load() is native.scan


def test_a_mixed_batch_is_the_msgspec_paths():
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}},
        {"ph": "X", "name": "k", "cat": "kernel", "pid": 1, "tid": 7, "ts": 2.5, "dur": 1, "args": {"correlation": 9}},
        {"ph": "s", "name": "f", "cat": "fwdbwd", "pid": 1, "tid": 2, "ts": 1.001, "id": 4},
        {"ph": "X", "name": "op", "cat": "cpu_op", "pid": "p", "tid": 2, "ts": 1, "dur": 3.25,
         "args": {"External id": 5, "op_type": "Conv", "Input Dims": [[1, 2], []], "x": {"y": [True, None]}}},
        {"ph": "f", "name": "f", "cat": "fwdbwd", "pid": 1, "tid": 3, "id": "a", "bp": "e"},
        {"ph": "t", "cat": "x", "ts": "soon", "id": None},
        {"ph": "i", "name": "mark", "ts": 3, "s": "g"},
        {"name": "no phase"},
    ]
    text = orjson.dumps(events)
    got = _scanned(text)
    assert got is not None and _same(got, decode_batch(text))
    assert got.flows.ts_state.tolist() == [0, 1, 2] and got.flows.ids == [4, "a", None]
    assert [o[0] for o in got.others] == [0, 6, 7]


def test_ac2g_flows_are_dropped_where_kernels_carry_correlation_ids():
    events = [
        {"ph": "s", "name": "ac2g", "cat": "ac2g", "pid": 0, "tid": 7, "ts": 1, "id": 3},
        {"ph": "s", "name": "f", "cat": "fwdbwd", "pid": 1, "tid": 2, "ts": 1, "id": 4},
        {"ph": "X", "name": "k", "cat": "kernel", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"correlation": 3}},
        {"ph": "f", "name": "ac2g", "cat": "ac2g", "pid": 0, "tid": 7, "ts": 2, "id": 3, "bp": "e"},
    ]
    text = orjson.dumps(events)
    got = _scanned(text)
    assert got.flows.keys == [("fwdbwd", "s", None, 1, 2)] and got.flows.local.tolist() == [1]
    assert _same(got, decode_batch(text))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (rb'[{"ph": "X", "name": "a", "name": "b", "ts": 1}]', "a field given twice"),
        (rb'[{"ph": "X", "ts": 1, "args": {"correlation": 1, "correlation": 2}}]', "an args key given twice"),
        (rb'[{"ph": "X", "n\u0061me": "a", "ts": 1}]', "an escaped key"),
        (rb'[{"ph": "X", "ts": 1, "args": {"corr\u0065lation": 2}}]', "an escaped args key"),
        (rb'[{"ph": "X", "ts": 1.5e3}]', "a time with an exponent"),
        (rb'[{"ph": "X", "ts": 99999999999999999}]', "a time of 17 integer digits"),
        (rb'[{"ph": "X", "ts": 1, "pid": 99999999999999999999}]', "a pid beyond int64"),
        (rb'[{"ph": "X", "ts": 1, "dur": 1e400}]', "a duration out of range"),
        (rb'[{"ph": "X", "ts": 1, "dur": -1}]', "a negative duration"),
        (rb'[{"ph": "X"}]', "no time"),
        (rb'[{"ph": "X", "ts": "1"}]', "a time as a string"),
        (rb'[{"ph": "X", "ts": 1, "args": null}]', "args null"),
        (rb'[{"ph": "X", "ts": 1, "args": {"correlation": 1.0}}]', "a correlation id with a point"),
        (rb'[{"ph": "X", "ts": 1, "name": "\ud800"}]', "a lone surrogate"),
        (b'[{"ph": "X", "ts": 1, "name": "\xff"}]', "a name that is not UTF-8"),
        (b'[{"ph": "X", "ts": 1, "name": "a\x01"}]', "a control character"),
        (rb'[{"ph": "X", "ts": 1, "x": [1, 2}]', "malformed JSON"),
        (rb'[{"ph": "X", "ts": 1}', "no closing bracket"),
        (rb'[{"ph": "X", "ts": 01}]', "a leading zero"),
        (rb'[{"ph": "X", "ts": 1}] x', "text after the array"),
        (rb'[1]', "an event that is not an object"),
        (rb'[{"ph": 5}]', "a phase that is not a string"),
        (rb'[{"ph": "s", "id": 1.5}]', "a flow id with a point"),
        (rb'[{"ph": "\u0058", "ts": 1}]', "a phase written with an escape (msgspec reads X)"),
    ],
)
def test_the_scanner_declines_what_it_is_not_sure_of(text, why):
    assert native.scan(text) is None or _scanned(text) is None, why
    if _decoded(text) is not None:  # what the msgspec path reads, it still reads
        assert _same(parse_batch(text), decode_batch(text))


@pytest.mark.parametrize(
    ("ts", "ns"),
    [("0", 0), ("-0", 0), ("1.5", 1500), ("-2.25", -2250), ("1718128378617843.123", 1718128378617843123),
     ("8999999999999999.999", 8999999999999999999), ("1.0005", 1000), ("1.0015", 1002), ("1.00050001", 1001),
     ("-1.0015", -1002), ("2.0004999", 2000), ("0.0000", 0)],
)
def test_times_are_exact_nanoseconds(ts, ns):
    text = b'[{"ph": "X", "ts": %s, "dur": 0.001}]' % ts.encode()
    got = _scanned(text)
    assert got.x.ts.tolist() == [ns] and got.x.dur.tolist() == [1]
    assert _same(got, decode_batch(text))


def test_escapes_are_decoded_as_json_says():
    name = 'a"b\\c/\b\f\n\r\t\u00e9\u4e2d\U0001f600'
    text = orjson.dumps([{"ph": "X", "ts": 1, "name": name, "cat": "k"}]).replace("é".encode(), rb"\u00e9")
    text = text.replace("😀".encode(), rb"\ud83d\ude00")
    got = _scanned(text)
    assert got.x.keys == [(name, "k", 0, 0)]
    assert _same(got, decode_batch(text))


_NAMES = st.sampled_from(["aten::mm", "k<float>{lambda()#1}, x", "ac2g", "", "é", "a\\\"b", "\u00e9\n"])
_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(-1e12, 1e12),
    st.decimals(min_value=-(10**17), max_value=10**17, places=4, allow_nan=False, allow_infinity=False),
    st.decimals(min_value=0, max_value=10**16, places=3, allow_nan=False, allow_infinity=False),
)
_VALUE = st.one_of(st.none(), st.booleans(), _NAMES, _NUMBER, st.lists(st.integers(0, 9), max_size=3))
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.one_of(st.sampled_from(["X", "X", "X", "s", "f", "t", "M", "i", "B", "E", "", "XX"]), st.none()),
        "name": st.one_of(_NAMES, st.integers(0, 3)),
        "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "ac2g", "fwdbwd", "python_function"]), st.none()),
        "ts": st.one_of(_NUMBER, _NAMES, st.none()),
        "dur": st.one_of(_NUMBER, st.none(), st.floats(-1, 1e9)),
        "pid": st.one_of(st.integers(-3, 2**64), _NAMES),
        "tid": st.one_of(st.integers(-3, 3), _NAMES, st.floats(0, 1)),
        "id": _VALUE,
        "bp": st.one_of(st.sampled_from(["e"]), st.none(), st.integers()),
        "args": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "correlation": st.one_of(st.integers(-(2**65), 2**65), st.none(), st.floats(0, 9)),
                    "External id": st.integers(-5, 2**40),
                    "op_type": st.one_of(_NAMES, st.none(), st.integers()),
                    "Input Dims": st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3),
                    "grid": _VALUE,
                },
            ),
            _VALUE,
        ),
        "s": _VALUE,
    },
)


def _json(events: list[dict]) -> bytes:
    """Events as JSON (integers of any size), decimals written as numbers with all their
    digits (as tracers write times)."""
    text = json.dumps(events, ensure_ascii=False, default=lambda d: f"\0{d}\0")
    return re.sub(r'"\\u0000([^"]*)\\u0000"', r"\1", text).encode()


_TIME = st.one_of(
    st.decimals(min_value=0, max_value=9 * 10**15, places=3, allow_nan=False, allow_infinity=False),
    st.integers(0, 2**53),
    st.decimals(min_value=-(10**6), max_value=10**6, places=6, allow_nan=False, allow_infinity=False),
)
_PLAUSIBLE = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "X", "s", "f", "t", "M", "i"]),
        "name": _NAMES,
        "ts": _TIME,
    },
    optional={
        "cat": st.sampled_from(["kernel", "cpu_op", "ac2g", "fwdbwd", "python_function", "é"]),
        "dur": st.one_of(st.floats(0, 1e9), _TIME),
        "pid": st.one_of(st.integers(-3, 2**40), _NAMES),
        "tid": st.one_of(st.integers(-3, 2**40), _NAMES),
        "id": st.one_of(st.integers(-(2**63), 2**63 - 1), _NAMES, st.none()),
        "bp": st.sampled_from(["e", "s"]),
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": st.integers(-(2**63), 2**63 - 1),
                "External id": st.integers(-5, 2**40),
                "op_type": st.one_of(_NAMES, st.none()),
                "Input Dims": st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3),
                "grid": _VALUE,
            },
        ),
    },
)


@given(st.lists(st.one_of(_PLAUSIBLE, _EVENT), max_size=12))
def test_the_scanner_gives_the_msgspec_paths_batch_or_declines(events):
    text = _json(events)
    got, want = _scanned(text), _decoded(text)
    if want is None:
        assert got is None  # whatever the msgspec path refuses or words, the scanner declines
    elif got is not None:
        assert _same(got, want)


@pytest.mark.parametrize("source", each_real_trace(exact.chrome_trace_files()))
def test_real_traces_scan_as_msgspec_decodes_them(source, tmp_path, monkeypatch):
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    texts = []

    def recording(text):
        texts.append(bytes(text))
        return parse_batch(text)

    monkeypatch.setattr(chrome_reader, "parse_batch", recording)
    fast = read_trace(plain, workers=1, chunk_size=1 << 16)
    scanned = [_scanned(t) for t in texts]
    assert texts and all(b is not None for b in scanned)  # real traces take the fast path whole
    assert all(_same(b, decode_batch(t)) for b, t in zip(scanned, texts))
    monkeypatch.setattr(native, "scan", None)
    assert fingerprint(read_trace(plain, workers=1, chunk_size=1 << 16)) == fingerprint(fast)


def test_mangled_real_events_give_the_msgspec_paths_batch_or_a_decline():
    """Bytes dropped, doubled or changed anywhere in real events (every structural
    character and digit among the replacements): never a different batch, never a crash."""
    source = next(p for p in exact.chrome_trace_files() if p.name.startswith("h100_bert_infer"))
    raw = gzip.decompress(source.read_bytes())
    start = raw.index(b"{", raw.index(b"traceEvents"))
    end = raw.rindex(b"}", 0, start + 20_000) + 1
    text = b"[" + raw[start:end] + b"]"
    assert _same(_scanned(text), decode_batch(text))
    rng = np.random.default_rng(40)
    alphabet = b'{}[]",:\\0123456789.-eEtrufalsn \n\x01\xff'
    taken = 0
    for _ in range(1500):
        at = int(rng.integers(1, len(text) - 1))
        how = int(rng.integers(3))
        if how == 0:
            mangled = text[:at] + text[at + 1 :]
        elif how == 1:
            mangled = text[:at] + text[at : at + 1] + text[at:]
        else:
            mangled = text[:at] + alphabet[int(rng.integers(len(alphabet)))].to_bytes(1, "big") + text[at + 1 :]
        got, want = _scanned(mangled), _decoded(mangled)
        if got is not None:
            taken += 1
            assert want is not None and _same(got, want), mangled[max(at - 40, 0) : at + 40]
    assert taken > 300  # most changes inside names and args still read on the fast path


@pytest.mark.parametrize(
    ("value", "read"),
    [(b"9223372036854775807", True), (b"-9223372036854775808", True), (b"9223372036854775808", False),
     (b"-9223372036854775809", False), (b"99999999999999999999", False), (b"-0", True)],
)
def test_integers_up_to_int64_are_read_and_larger_ones_declined(value, read):
    text = b'[{"ph": "s", "id": %s, "ts": 1, "pid": %s}]' % (value, value)
    got = _scanned(text)
    assert (got is not None) == read
    if read:
        assert got.flows.ids == [int(value)] and got.flows.keys[0][3] == int(value)
        assert _same(got, decode_batch(text))


def test_the_build_runs_on_the_standard_library_alone(tmp_path):
    """make builds the scanner before it installs the requirements (numpy among them): a
    clean clone's first `make` once failed so and fell back to msgspec."""
    python = tmp_path / "bare" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    out = tmp_path / native.built_path().name
    run = subprocess.run([str(python), str(native.SOURCE.with_name("native.py")), str(out)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert out.is_file() and out.stat().st_size > 10_000

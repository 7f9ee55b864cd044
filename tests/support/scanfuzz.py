"""A differential fuzzer of Atrace's event scanner against the msgspec path.

The scanner's promise (``traces/atrace/io/chrome/_eventscan.c``): for any bytes, it gives
the batch the msgspec path (``decode_batch``) gives, or declines. This fuzzer holds it to
that on byte-level mutations of real batches: runs of events cut from the real traces under
``shared/data/real-traces`` and the inputs that once diverged (``tests/data/scanner-corpus``),
mutated by dropping, doubling, swapping and overwriting bytes and spans, by splicing two
inputs, and by writing in the tokens that break decoders: invalid UTF-8 and UTF-8 that
Python refuses (overlong forms, encoded surrogates, past U+10FFFF), lone and misordered
surrogate escapes, escaped keys and phases, duplicated fields, huge and odd numbers, deep
nesting, and many distinct pids and names (the interning tables grown and probed).

    python -m tests.support.scanfuzz [--seconds 600] [--seed N] [--save DIR]

prints how many inputs it tried, how many the scanner took whole, declined, or the msgspec
path refused, and stops at the first divergence (its input written to DIR, by default a
temporary folder, never the working tree) with a non-zero exit. A divergence found is kept
for good by copying its file into tests/data/scanner-corpus/ (the regression test reads
every file there). ``make fuzz-scanner`` runs it for ten minutes; CI runs it for a bounded
time in the slow tier (tests/traces/atrace/io/chrome/test_scanner_fuzz.py).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from traces.atrace.io.chrome import batch as chrome_batch
from traces.atrace.io.chrome import native
from traces.atrace.io.chrome.batch import Batch, decode_batch

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "scanner-corpus"

#: Tokens written into inputs: what breaks decoders, as bytes.
TOKENS = [
    b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xe4\xb8", b"\x80",
    b"\xc3\xa9", b"\xe4\xb8\xad", b"\xf0\x9f\x98\x80", b"\xf8\x88\x80\x80\x80",
    rb"\ud800", rb"\udc00", rb"\ud83d\ude00", rb"\ud800\u0041", rb"\ud800\\", rb"\u0058", rb"\u0000", rb"\"",
    rb"\x", rb"\u12", b"\\", b'"', b"\x01", b"\t",
    b"1e400", b"-1e400", b"1e-400", b"99999999999999999999", b"-9223372036854775809", b"9223372036854775807",
    b"1.2345678901234567", b"0.30000000000000004", b"12345678901234567.5", b"-0", b"01", b"1.", b".5", b"1e5",
    b"NaN", b"Infinity", b"true", b"false", b"null", b"[]", b"{}", b"[[[[[[[[", b"]]]]", b"{\"a\":{\"b\":",
    b'"ph":"X",', b'"ph":"s",', b'"ph":"f",', b'"ph":"M",', b'"ph":"\\u0058",', b'"ts":1,', b'"ts":"1",',
    b'"dur":-1,', b'"dur":1e308,', b'"pid":"p",', b'"tid":1.5,', b'"id":1.5,', b'"id":null,', b'"bp":"e",',
    b'"n\\u0061me":"x",', b'"args":{"correlation":1,"correlation":2},', b'"args":{"op_type":null},',
    b'"args":{"External id":1.0},', b'"args":null,', b'"name":"a","name":"b",', b'"cat":"ac2g",',
]
#: Single bytes written over others: every structural character, digits, and non-ASCII.
ALPHABET = b'{}[]",:\\0123456789.-+eEtrufalsn \n\x00\x01\x7f\x80\xbf\xc2\xe0\xed\xf0\xf4\xff'


def same(a, b) -> bool:
    """Whether two batch parts hold the same values (arrays by value and type)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and np.array_equal(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def scanned(text: bytes) -> Batch | None:
    """The scanner's batch, or None where it declines."""
    return chrome_batch._scanned(text, native.scan(text))


def decoded(text: bytes) -> Batch | None:
    """The msgspec path's batch, or None where it refuses the text or finds a problem."""
    try:
        got = decode_batch(text)
    except Exception:  # noqa: BLE001 - any refusal: the scanner must decline too
        return None
    return None if got.x is not None and got.x.error is not None else got


def divergence(text: bytes) -> tuple[str | None, str]:
    """What the scanner did that the msgspec path does not (None: it kept its promise), and
    what became of the input: "taken", "declined" (the msgspec path reads it) or "refused"."""
    try:
        got = scanned(text)
    except Exception as exc:  # noqa: BLE001 - the scanner never raises: it declines
        return f"the scanner raised {exc!r}", "raised"
    want = decoded(text)
    if got is None:
        return None, "refused" if want is None else "declined"
    if want is None:
        return "the scanner took a batch the msgspec path refuses", "taken"
    if not same(got, want):
        return "the scanner's batch differs from the msgspec path's", "taken"
    return None, "taken"


def real_batches(per_trace: int = 3, limit_bytes: int = 24_000, head_bytes: int = 4 << 20) -> list[bytes]:
    """Runs of events cut from each real trace's first megabytes (that the msgspec path
    reads): ``per_trace`` runs of at most ``limit_bytes``, spread over the head."""
    from tests.traces.atrace import exact

    out = []
    for source in exact.chrome_trace_files():
        opener = gzip.open if source.suffix == ".gz" else open
        with opener(source, "rb") as f:
            raw = f.read(head_bytes)
        events = raw.find(b"traceEvents")
        events = events if events >= 0 else 0
        for k in range(per_trace):
            start = raw.find(b"{", events + 1 + k * (len(raw) - events) // (per_trace + 1))
            while start >= 0 and raw[:start].rstrip()[-1:] not in (b",", b"["):  # an event's own '{'
                start = raw.find(b"{", start + 1)
            if start < 0:
                continue
            end = raw.rfind(b"}", start, start + limit_bytes)
            while end > start and raw[end + 1 : end + 8].lstrip()[:1] not in (b",", b"]"):
                end = raw.rfind(b"}", start, end)
            if end > start:
                text = b"[" + raw[start : end + 1] + b"]"
                if decoded(text) is not None:
                    out.append(text)
    return out


M64 = (1 << 64) - 1


def colliding_pids(n: int) -> list[int]:
    """Pids whose hashes under the scanner's first, unkeyed hash share their low 24 bits, so
    every one fell into one run of slots (computed by inverting the hash, no search)."""
    h0 = 0x9E3779B97F4A7C15 ^ ((8 * 0xFF51AFD7ED558CCD) & M64)
    m1, m2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    inv1, inv2 = pow(m1, -1, 1 << 64), pow(m2, -1, 1 << 64)
    pids = []
    for j in range(1, n + 1):
        h = (j << 24) ^ ord("i")  # the table's tag for integers
        g = h ^ (h >> 29) ^ (h >> 58)
        k = ((g * inv2 * inv2) & M64) ^ h0
        v = ((k ^ (k >> 31) ^ (k >> 62)) * inv1) & M64
        pids.append(v - (1 << 64) if v >> 63 else v)
    return pids


def corpus() -> list[bytes]:
    return [p.read_bytes() for p in sorted(CORPUS.glob("*.json"))]


@dataclass
class Mutator:
    """Byte-level mutations, drawn from one seeded generator (a run is repeatable)."""

    rng: np.random.Generator
    seeds: list[bytes]

    def _at(self, text: bytes) -> int:
        return int(self.rng.integers(0, max(len(text), 1)))

    def _span(self, text: bytes) -> tuple[int, int]:
        a = self._at(text)
        return a, min(len(text), a + int(self.rng.integers(1, 64)))

    #: How often each mutation of :meth:`one` is drawn: tokens written into strings most
    #: (inputs that stay JSON reach the scanner's reading, not only its first refusal).
    WEIGHTS = np.array([1, 1, 2, 4, 2, 1, 1, 1, 2], float) / 15

    def one(self, text: bytes) -> bytes:
        how = int(self.rng.choice(9, p=self.WEIGHTS))
        a, b = self._span(text)
        if how == 0:  # drop a byte or a span
            return text[:a] + text[a + 1 :] if self.rng.random() < 0.5 else text[:a] + text[b:]
        if how == 1:  # double a span
            return text[:b] + text[a:b] + text[b:]
        if how == 2:  # overwrite a byte
            return text[:a] + ALPHABET[int(self.rng.integers(len(ALPHABET)))].to_bytes(1, "big") + text[a + 1 :]
        if how in (3, 4):  # write a token in, inside a string most often (after a quote)
            token = TOKENS[int(self.rng.integers(len(TOKENS)))]
            if how == 3:
                quote = text.find(b'"', a)
                a = quote + 1 if quote >= 0 else a
            return text[:a] + token + text[a:]
        if how == 5:  # replace a span with one from another input
            other = self.seeds[int(self.rng.integers(len(self.seeds)))]
            c, d = self._span(other)
            return text[:a] + other[c:d] + text[b:]
        if how == 6:  # swap two spans
            c, d = self._span(text)
            if d <= a:
                return text[:c] + text[a:b] + text[d:a] + text[c:d] + text[b:]
            return text
        if how == 7:  # a run of events with many distinct pids and names: tables grow and probe
            n = int(self.rng.integers(100, 3000))
            base = int(self.rng.integers(-(2**62), 2**62))
            step = int(self.rng.choice([1, 1 << 24, 1 << 32, 4096, 7919]))
            pids = colliding_pids(n) if self.rng.random() < 0.3 else [base + i * step for i in range(n)]
            events = b",".join(b'{"ph":"X","ts":%d,"name":"n%d","pid":%d,"tid":%d}' % (i, i % 97, pid, i % 5)
                               for i, pid in enumerate(pids))
            close = text.rfind(b"]")
            return text[:close] + (b"," if close > 1 else b"") + events + text[close:] if close > 0 else text
        # change a number's digits
        digit = next((i for i in range(a, min(len(text), a + 200)) if 48 <= text[i] <= 57), None)
        if digit is None:
            return text
        return text[:digit] + str(int(self.rng.integers(0, 10**int(self.rng.integers(1, 19))))).encode() + text[digit + 1 :]

    def mutant(self) -> bytes:
        text = self.seeds[int(self.rng.integers(len(self.seeds)))]
        for _ in range(int(self.rng.choice([1, 1, 1, 2, 2, 3]))):
            text = self.one(text)
        return text


@dataclass
class Tally:
    tried: int = 0
    taken: int = 0  # the scanner gave the msgspec path's batch
    declined: int = 0  # the msgspec path read it, the scanner declined
    refused: int = 0  # the msgspec path refused it (so did the scanner)


def run(seconds: float, seed: int, save: Path | None = None, seeds: list[bytes] | None = None) -> tuple[Tally, Path | None]:
    """Fuzz for ``seconds``; the tally, and the file of the first divergence (None: none)."""
    if native.scan is None:
        raise RuntimeError(native.unavailable or "the event scanner is not loaded")
    seeds = seeds if seeds is not None else real_batches() + corpus()
    mutator = Mutator(np.random.default_rng(seed), seeds)
    tally = Tally()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(50):
            text = mutator.mutant()
            tally.tried += 1
            wrong, fate = divergence(text)
            if wrong:
                folder = save or Path(tempfile.mkdtemp(prefix="scanfuzz-"))
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"diverged-{hashlib.sha256(text).hexdigest()[:12]}.json"
                path.write_bytes(text)
                print(f"divergence: {wrong}: {path}", file=sys.stderr)
                return tally, path
            setattr(tally, fate, getattr(tally, fate) + 1)
    return tally, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--save", type=Path, default=None, help="where a diverging input is written")
    args = parser.parse_args(argv)
    started = time.monotonic()
    tally, found = run(args.seconds, args.seed, args.save)
    took = time.monotonic() - started
    print(f"seed {args.seed}: {tally.tried:,} inputs in {took:.0f} s ({tally.tried / took:,.0f}/s): "
          f"{tally.taken:,} scanned as msgspec decodes them, {tally.declined:,} declined, "
          f"{tally.refused:,} refused by both")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

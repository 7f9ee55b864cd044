"""The event scanner against the msgspec path on fuzzed bytes (tests/support/scanfuzz.py):
every input that ever diverged, kept in tests/data/scanner-corpus/, and a bounded fuzz run
(SCANNER_FUZZ_SECONDS, 20 s by default; `make fuzz-scanner` runs ten minutes)."""

from __future__ import annotations

import os
import time

import pytest

from tests.support import scanfuzz
from tests.support.needs import missing
from traces.atrace.io.chrome import native


@pytest.fixture(autouse=True)
def scanner():
    if native.scan is None:
        missing(native.unavailable or "the event scanner is not loaded")


@pytest.mark.parametrize("path", sorted(scanfuzz.CORPUS.glob("*.json")), ids=lambda p: p.stem)
def test_an_input_that_once_diverged_gives_the_msgspec_paths_batch_or_a_decline(path):
    wrong, _fate = scanfuzz.divergence(path.read_bytes())
    assert wrong is None


def test_the_corpus_is_there():
    assert len(list(scanfuzz.CORPUS.glob("*.json"))) >= 5


@pytest.mark.slow
def test_a_bounded_fuzz_run_finds_no_divergence(tmp_path):
    seconds = float(os.environ.get("SCANNER_FUZZ_SECONDS", "20"))
    seed = time.time_ns() % 2**32  # another part of the space each run; said on failure
    tally, found = scanfuzz.run(seconds, seed, save=tmp_path)
    assert found is None, (f"seed {seed}: {found.read_bytes()[:400]!r}; keep it as a regression test: "
                           f"copy {found} into tests/data/scanner-corpus/")
    # every outcome was reached: inputs read on the fast path, declined, refused by both
    assert tally.taken > 100 and tally.declined > 0 and tally.refused > 0, tally

"""Block-compressed bytes: any slice of the original back exactly, from memory or a file, and
a damaged file refused with what is wrong."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.traces import real_trace
from traces.atrace import read_trace
from traces.atrace.io import blocks


@given(data=st.binary(max_size=3000), block=st.integers(1, 700), cuts=st.lists(st.integers(-10, 3100), max_size=6))
def test_every_slice_reads_back_the_original_bytes(data, block, cuts):
    stored = blocks.compress(data, block=block)
    view = blocks.open_bytes(stored)
    assert isinstance(view, blocks.BlockBytes) and len(view) == len(data)
    assert view[:] == data
    for a, b in zip(cuts, cuts[1:], strict=False):
        assert view[a:b] == data[a:b]


def test_plain_bytes_stay_plain():
    """A blob stored before the format (or JSON text) reads as itself."""
    view = blocks.open_bytes(b'{"a": 1}{"b": 2}')
    assert not isinstance(view, blocks.BlockBytes) and bytes(view[8:16]) == b'{"b": 2}'
    assert len(blocks.open_bytes(b"")) == 0


def test_a_file_is_read_by_the_blocks_a_slice_spans():
    data = b"".join(orjson.dumps({"External id": i, "Input Dims": [[i, 64], [64, 64]]}) for i in range(5000))
    stored = blocks.compress(data, block=4096)
    f = io.BytesIO(stored)
    reads = []

    def read(offset, size):
        reads.append(size)
        f.seek(offset)
        return f.read(size)

    view = blocks.BlockBytes(read)
    reads.clear()
    assert view[100_000:100_050] == data[100_000:100_050]
    assert len(reads) == 1 and reads[0] < 4096  # one compressed block, nothing else
    assert view[100_010:100_020] == data[100_010:100_020] and len(reads) == 1  # kept


def test_real_trace_arguments_shrink_at_least_eight_fold():
    blob = bytes(read_trace(real_trace("mi300_qwen_infer.json.gz")).args.blob)
    stored = blocks.compress(blob)
    assert len(stored) * 8 < len(blob)
    assert blocks.open_bytes(stored)[:] == blob


@pytest.mark.parametrize(("damage", "message"), [
    (lambda s: s[:20], "no header"),
    (lambda s: s[:40], "cut short in its index"),
    (lambda s: s[:-5], "cut short in block"),
    (lambda s: s[:-30] + bytes(30), "does not decompress"),
    (lambda s: blocks.MAGIC + s[8:12] + (10**9).to_bytes(8, "little") + s[20:], "does not add up"),
])
def test_a_damaged_file_is_a_blocks_error_saying_what(damage, message):
    data = bytes(range(256)) * 200
    stored = damage(blocks.compress(data, block=4096))
    with pytest.raises(blocks.BlocksError, match=message):
        blocks.open_bytes(stored)[:]

"""Span files read in blocks: lines across blocks, and a limit on what a gzip file inflates to,
met before a bomb is inflated whole."""

import gzip
import io
import zlib

import pytest

from traces.requests.service import TooLarge, bounded_lines


class Counting(io.BytesIO):
    """A file that counts the bytes read from it."""

    taken = 0

    def read(self, n=-1):
        out = super().read(n)
        self.taken += len(out)
        return out


def test_lines_come_whole_across_blocks_and_the_last_needs_no_newline():
    text = b"first line\nsecond, a longer line\n\nlast"
    assert list(bounded_lines(io.BytesIO(text), 1000, block=4)) == [b"first line", b"second, a longer line", b"", b"last"]
    assert list(bounded_lines(io.BytesIO(b""), 10)) == []


@pytest.mark.slow  # inflates a gzip bomb up to the limit: seconds of CPU (make test runs it, make test-fast does not)
def test_a_gzip_bomb_stops_at_the_limit_having_inflated_little_more():
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip
    zeros = bytes(1 << 20)
    bomb = b"".join(packer.compress(zeros) for _ in range(512)) + packer.flush()  # 512 MiB of one line
    assert len(bomb) < 1 << 20
    raw = Counting(bomb)
    lines = bounded_lines(gzip.GzipFile(fileobj=raw), 1 << 20, block=1 << 16)
    with pytest.raises(TooLarge, match=f"inflates to more than {1 << 20} bytes"):
        list(lines)
    assert raw.taken < len(bomb) // 2  # it read the start of the file, not all of it


def test_a_file_at_the_limit_is_read():
    body = b"x" * 99 + b"\n"
    assert list(bounded_lines(io.BytesIO(body), 100)) == [b"x" * 99]
    with pytest.raises(TooLarge):
        list(bounded_lines(io.BytesIO(body + b"y"), 100))

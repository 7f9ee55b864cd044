"""Atrace's own binary form of a trace: its columns as a NumPy ``.npz`` archive.

For traces that Atrace wrote itself and reads back soon, from another process or machine
(a distributed job's per-rank results meet in one cross-rank step): loading is a copy of
the columns, no parsing. Strings, tracks and metadata travel as one JSON header; arguments
as their JSON blob with offsets. Nothing is pickled: reading uses ``allow_pickle=False``.
"""

from __future__ import annotations

import dataclasses
import io
import os
import zipfile
from typing import BinaryIO

import numpy as np
import orjson

from ..errors import TraceFormatError
from ..model.trace import ArgStore, StringTable, Trace, Track

__all__ = ["npz_bytes", "read_npz", "write_npz"]

FORMAT = "atrace-npz/1"
_COLUMNS = ("name", "cat", "op", "kind", "ph", "ts", "dur", "track", "corr", "ext", "flags",
            "edge_src", "edge_dst", "edge_kind")


def write_npz(trace: Trace, target: str | os.PathLike | BinaryIO, *, compress: bool = True) -> None:
    header = {
        "format": FORMAT,
        "strings": trace.strings.strings,
        "tracks": [dataclasses.asdict(t) for t in trace.tracks],
        "meta": trace.meta,
    }
    head = orjson.dumps(header, default=str, option=orjson.OPT_NON_STR_KEYS)
    arrays = {c: getattr(trace, c) for c in _COLUMNS}
    arrays["header"] = np.frombuffer(head, np.uint8)
    arrays["args_blob"] = np.frombuffer(trace.args.blob, np.uint8)
    arrays["args_offsets"] = trace.args.offsets
    (np.savez_compressed if compress else np.savez)(target, **arrays)


def npz_bytes(trace: Trace, *, compress: bool = True) -> bytes:
    buf = io.BytesIO()
    write_npz(trace, buf, compress=compress)
    return buf.getvalue()


def read_npz(source: str | os.PathLike | BinaryIO | bytes) -> Trace:
    """A trace written by :func:`write_npz`."""
    if isinstance(source, bytes | bytearray):
        source = io.BytesIO(source)
    try:
        with np.load(source, allow_pickle=False) as z:
            header = orjson.loads(z["header"].tobytes())
            if header.get("format") != FORMAT:
                raise TraceFormatError(f"not an Atrace npz trace (format {header.get('format')!r})")
            columns = {c: z[c] for c in _COLUMNS}
            args = ArgStore(z["args_blob"].tobytes(), z["args_offsets"])
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as exc:
        raise TraceFormatError(f"not an Atrace npz trace: {exc}") from None
    return Trace(
        strings=StringTable(header["strings"]),
        args=args,
        tracks=[Track(**t) for t in header["tracks"]],
        meta=header["meta"],
        **columns,
    )

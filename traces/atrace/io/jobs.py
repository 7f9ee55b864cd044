"""Reading a distributed job: one trace per rank, from a folder, several files or an archive.

:func:`read_job` returns the ranks' traces in rank order. A rank's number comes from its
``distributedInfo.rank`` (Kineto writes it), else from ``rank<N>`` / ``rank-<N>`` /
``rank_<N>`` in its file name, else from its position. Archives (``.zip``, ``.tar``,
``.tar.gz``, ``.tgz``) are read member by member without unpacking to disk.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zipfile
from pathlib import Path

from ..errors import TraceFormatError
from ..model.trace import Trace
from .reader import read_trace

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
MAX_RANKS = 4096


def _is_trace_name(name: str) -> bool:
    return name.lower().endswith(_TRACE_SUFFIXES)


def _members(source: str | os.PathLike) -> list[tuple[str, object]]:
    """(name, readable source) for each trace file of a folder or an archive."""
    path = Path(source)
    if path.is_dir():
        return [(p.name, p) for p in sorted(path.iterdir()) if p.is_file() and _is_trace_name(p.name)]
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return [(Path(n).name, z.read(n)) for n in sorted(z.namelist()) if _is_trace_name(n)]
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            out = []
            for m in sorted(tar.getmembers(), key=lambda m: m.name):
                if m.isfile() and _is_trace_name(m.name):
                    out.append((Path(m.name).name, tar.extractfile(m).read()))
            return out
    return [(path.name, path)]


def read_job(sources: str | os.PathLike | list) -> list[Trace]:
    """The rank traces of a job (a folder, an archive, or a list of files), by rank."""
    items = []
    for src in sources if isinstance(sources, list | tuple) else [sources]:
        items += _members(src)
    if not items:
        raise TraceFormatError("no trace files (.json, .json.gz) found", str(sources))
    if len(items) > MAX_RANKS:
        raise TraceFormatError(f"{len(items)} trace files: more than {MAX_RANKS} ranks", str(sources))
    traces = []
    for name, src in items:
        trace = read_trace(io.BytesIO(src) if isinstance(src, bytes) else src)
        trace.meta["file"] = name
        traces.append(trace)
    for trace, rank in zip(traces, rank_numbers([t.meta for t in traces], [name for name, _ in items])):
        trace.meta["rank"] = rank
    return sorted(traces, key=lambda t: t.meta["rank"])


def rank_numbers(metas: list[dict], names: list[str]) -> list[int]:
    """The rank of each file of a job, in order: its ``distributedInfo.rank``, else the
    number in its name, else its position; if ranks repeat (copies of one file, or names
    without ranks) every file is numbered by its position."""
    ranks = [_rank_of(meta, name, position) for position, (meta, name) in enumerate(zip(metas, names))]
    return ranks if len(set(ranks)) == len(ranks) else list(range(len(ranks)))


def _rank_of(meta: dict, name: str, position: int) -> int:
    said = rank_said(meta, name)
    return position if said is None else said


def rank_said(meta: dict, name: str) -> int | None:
    """The rank a file says it is: its ``distributedInfo.rank``, else the number in its name
    ("rank3", "rank_3", "rank-3"); None when neither says."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None

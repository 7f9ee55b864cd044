"""The trace page's page data — findings, flame, timeline, critical path, correlation,
comparison, versions, and the device's metrics around a capture — stored once by the
analysis, read per request.

:func:`store_page_data` runs in the worker (from ``writers.analyse``): Atrace computes them
(:func:`traces.atrace.render.page_data.compute_page_data`, within the page's limits in
``traces.store.page_limits``) and they are stored flat in the trace's folder
(names ``view.*``, so deleting the trace deletes them; traces/store/files.py). The readers below
answer the pages and the API from those files alone; bad parameters raise
:class:`BadRequest` with what was wrong.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File

from fleet.reading import history
from traces import atrace
from traces.atrace.analysis.advice import RULES, compare_findings
from traces.atrace.analysis.comparison import compare_tables
from traces.atrace.analysis.versions import step_regressions, step_time, version_regressions
from traces.atrace.render.page_data import PREFIX, compute_page_data, load_document, load_timeline
from traces.atrace.render.timeline import window
from traces.choices import TraceSource, TraceStatus
from traces.models import Trace
from traces.store.files import (
    ARGS,
    VIEWS_TEMPORARY,
    ResultUnreadable,
    TraceFiles,
    flush_to_disk,
    reading_result,
)
from traces.store.page_limits import MAX_BARS, MAX_EDGES, MAX_WIDTH_PX, STORED

SIDES = ("host", "device")
METRICS = ("device_utilization", "temperature_c", "power_w", "memory_used_bytes")
METRICS_MARGIN = timedelta(minutes=1)
MAX_VERSION_TRACES = 200  # most recent ready traces a versions view reads


class BadRequest(ValueError):
    """A parameter the views cannot answer; the message says which and why."""


class PageDataMissing(LookupError):
    """The trace is ready but its analyses were not stored (analysed before they existed)."""


# -- writing (in the worker) --------------------------------------------------------------
def store_page_data(files: TraceFiles, parsed: atrace.Trace, **known) -> int:
    """Compute and store every analysis of a parsed trace; returns the bytes stored.

    ``known`` may pass a ``breakdown``, ``path`` and ``correlation`` already computed, to
    reuse them. Each file replaces an earlier one whole (a reader never meets one
    half-written): on a local file system they are written into a hidden folder in the
    trace's and renamed into place; other storages get copies through the storage API
    (traces/store/files.py).
    """
    pages = compute_page_data(parsed, STORED, **known)
    folder = files.local_folder()
    if folder is not None:
        return _publish_local(pages, folder)
    total = 0
    with tempfile.TemporaryDirectory(prefix="asicmon-views-") as tmp:
        for name in pages.save(tmp):
            with (Path(tmp) / name).open("rb") as f:
                files.save_stream(files.name(name), File(f))
            total += (Path(tmp) / name).stat().st_size
    return total


def _publish_local(pages, folder: Path) -> int:
    """Write the views into a hidden folder inside the trace's, flush each to the disk (when
    TRACE_STORAGE_FSYNC) and rename it into place; returns the bytes stored. The timeline's
    event details read the args the drill-down stored (a hard link of them in the hidden
    folder lets Atrace see them there; without one it writes its own copy)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=VIEWS_TEMPORARY))
    try:
        args_file = None
        with contextlib.suppress(OSError):
            os.link(folder / ARGS, tmp / ARGS)
            args_file = ARGS
        total = 0
        for name in pages.save(tmp, args_file=args_file):
            if settings.TRACE_STORAGE_FSYNC:
                flush_to_disk(tmp / name)
            total += (tmp / name).stat().st_size
            (tmp / name).replace(folder / name)
        return total
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- reading --------------------------------------------------------------------------------
def page_data_folder(trace: Trace) -> Path:
    """A local folder holding the trace's analysis files (the storage's own, or a copy made
    once for storages without local paths)."""
    files = TraceFiles(trace.pk)
    folder = files.local_folder()
    if folder is None:
        stamp = int(trace.ready_at.timestamp()) if trace.ready_at else 0
        folder = files.local_copy(PREFIX, Path(settings.VAR_DIR) / "cache" / "trace-views" / f"{trace.pk}-{stamp}",
                                  max_bytes=settings.TRACE_CACHE_MAX_MB << 20)
    if not (folder / f"{PREFIX}paths.json").exists():
        raise PageDataMissing(f"trace {trace.pk} was analysed before its views were stored; re-upload it")
    return folder


def _document(trace: Trace, name: str) -> dict[str, Any]:
    """One stored view of ``trace``; ResultUnreadable when it cannot be read whole."""
    folder = page_data_folder(trace)
    with reading_result(f"trace {trace.pk}", f"{name} view"):
        return load_document(folder, name)


def _timeline(trace: Trace):
    folder = page_data_folder(trace)
    with reading_result(f"trace {trace.pk}", "timeline"):
        return load_timeline(folder)


def findings(trace: Trace, query=None) -> dict[str, Any]:
    """The advisor's findings (``?rule=`` one rule's, ``?top=N`` the N largest)."""
    query = query or {}
    rule = query.get("rule", "")
    if rule and rule not in RULES:
        raise BadRequest(f"rule must be one of {', '.join(RULES)}, not {rule!r}")
    top = _number(query, "top", None, integer=True)
    if top is not None and top < 1:
        raise BadRequest(f"top must be at least 1, not {top}")
    doc = _findings_document(trace)
    rows = [f for f in doc["findings"] if not rule or f["rule"] == rule]
    return {**doc, "findings": rows[:top] if top else rows}


def _findings_document(trace: Trace) -> dict[str, Any]:
    try:
        return _document(trace, "findings")
    except FileNotFoundError:
        raise PageDataMissing(f"trace {trace.pk} was analysed before findings existed; re-upload it") from None


def flame(trace: Trace, side: str = "") -> dict[str, Any]:
    doc = _document(trace, "flame")
    if not side:
        return doc
    if side not in SIDES:
        raise BadRequest(f"side must be one of {', '.join(SIDES)}, not {side!r}")
    return {side: doc[side]}


def _number(query, name: str, default: float | None, *, integer: bool = False) -> float | None:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise BadRequest(f"{name} must be {kind} (microseconds on the trace's clock), not {raw!r}") from None


def timeline(trace: Trace, query) -> dict[str, Any]:
    """``?start_us=&end_us=&width_px=`` → the bars of that window (default: everything)."""
    layout = _timeline(trace)
    t0, t1 = layout.span_ns
    start_us = _number(query, "start_us", t0 / 1000)
    end_us = _number(query, "end_us", max(t1, t0 + 1) / 1000)
    width = _number(query, "width_px", 1600, integer=True)
    if not 1 <= width <= MAX_WIDTH_PX:
        raise BadRequest(f"width_px must be between 1 and {MAX_WIDTH_PX}, not {width}")
    if end_us <= start_us:
        raise BadRequest(f"end_us ({end_us:g}) must be after start_us ({start_us:g})")
    return window(
        layout, round(start_us * 1000), round(end_us * 1000), width, max_bars=MAX_BARS, max_edges=MAX_EDGES
    ).to_dict()


def event(trace: Trace, index: int) -> dict[str, Any]:
    try:
        return _timeline(trace).event_detail(index)
    except KeyError as exc:
        raise BadRequest(str(exc.args[0])) from None


def critical_path(trace: Trace, step: str = "") -> dict[str, Any]:
    """The critical-path table of the whole trace, or of one of its valid steps."""
    doc = _document(trace, "paths")
    valid = doc["valid_steps"]
    if step:
        name = _step_name(step, valid)
        table = doc["step_paths"][name]
    else:
        name, table = None, doc["whole"]
    if table is not None:
        table = {**table, "least_slack_by_op": slack_by_operator(table["least_slack"])}
    return {"step": name, "steps": doc["steps"], "valid_steps": valid, "table": table}


def slack_by_operator(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The events off the path with the least slack (least first), as the page shows them:
    one row per operator (how many of its events are listed, the least slack, the duration
    of that event and its index for the event's details), zero-length events left out: they
    cannot lengthen the path, and dozens of them (or of one synchronisation) would fill the
    table with nothing that helps."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        if not event["dur_us"]:
            continue
        row = rows.get(event["name"])
        if row is None:
            rows[event["name"]] = {**event, "events": 1}
        else:
            row["events"] += 1
    shown = sum(row["events"] for row in rows.values())
    return {"rows": list(rows.values()), "zero_length_hidden": len(events) - shown}


def _step_name(step: str, valid: list[str]) -> str:
    if step in valid:
        return step
    matches = [v for v in valid if v.rsplit("#", 1)[-1] == step]  # "?step=3" for step#3
    if matches:
        return matches[0]
    shown = ", ".join(valid[:20]) + (" …" if len(valid) > 20 else "") if valid else "none"
    raise BadRequest(f"no stored critical path for step {step!r}; valid steps: {shown}")


def correlation(trace: Trace) -> dict[str, Any]:
    return _document(trace, "correlation")


def metrics(trace: Trace) -> dict[str, Any]:
    """The device's counters over the capture window and a minute either side, raw samples
    from the time-series store; ``unavailable`` says why they are missing when the store
    does not answer (the series are then empty)."""
    if trace.source != TraceSource.CAPTURE or not trace.device_id or not trace.capture_started_at:
        raise BadRequest("only a capture of a device has metrics around it; this trace is an upload")
    start = trace.capture_started_at - METRICS_MARGIN
    end = (trace.capture_ended_at or trace.capture_started_at) + METRICS_MARGIN
    try:
        found, unavailable = history.read(trace.device_id, list(METRICS), start, end), None
    except history.TsdbError as exc:
        found, unavailable = {}, history.unavailable(exc)
    series = {name: [[round(t * 1e6, 1), value] for t, value in found.get(name, [])] for name in METRICS}
    return {
        "device": trace.device_id,
        "capture_us": [trace.capture_started_at.timestamp() * 1e6, (trace.capture_ended_at or trace.capture_started_at).timestamp() * 1e6],
        "window_us": [start.timestamp() * 1e6, end.timestamp() * 1e6],
        "series": series,
        "unavailable": unavailable,
    }


def comparison(a: Trace, b: Trace, *, level: str = "operator", rank: str = "total") -> dict[str, Any]:
    try:
        result = compare_tables(
            _document(a, "op_table"),
            _document(b, "op_table"),
            labels=(_label(a), _label(b)),
            level=level,
            rank=rank,
        )
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {"a": _brief(a), "b": _brief(b), **result, "findings": _findings_difference(a, b)}


def _findings_difference(a: Trace, b: Trace) -> dict[str, Any] | None:
    """Which findings appeared or went away from A to B (None if either has none stored)."""
    try:
        return compare_findings(_findings_document(a), _findings_document(b))
    except PageDataMissing:
        return None


def _label(trace: Trace) -> str:
    version = f" sw {trace.sw_version}" if trace.sw_version else ""
    return f"#{trace.pk} {trace.name}{version}"


def _brief(trace: Trace) -> dict[str, Any]:
    return {
        "id": trace.pk,
        "name": trace.name,
        "url": trace.get_absolute_url(),
        "device_type": trace.device_type,
        "sw_version": trace.sw_version,
        "workload": trace.workload,
        "host": trace.host_name,
    }


def previous_capture(trace: Trace) -> Trace | None:
    """The ready capture of the same workload and device type made just before this one."""
    if not trace.workload:
        return None
    return (
        Trace.objects.filter(
            status=TraceStatus.READY,
            workload=trace.workload,
            device_type=trace.device_type,
            created_at__lte=trace.created_at,
        )
        .exclude(pk=trace.pk)
        .order_by("-created_at", "-id")
        .first()
    )


def versions(workload: str, device_type: str) -> dict[str, Any]:
    """Per-operator means per software version of one workload on one device type."""
    if not workload or not device_type:
        raise BadRequest("both workload and type are required")
    traces = list(
        Trace.objects.filter(status=TraceStatus.READY, workload=workload, device_type=device_type)
        .exclude(sw_version="")
        .order_by("-created_at")[:MAX_VERSION_TRACES]
    )
    records = []
    for t in traces:
        try:
            record = {"id": t.pk, "version": t.sw_version, "ops": _document(t, "op_means")}
            record.update(step_time(_document(t, "paths").get("steps", [])) or {})
            records.append(record)
        except (PageDataMissing, FileNotFoundError, ResultUnreadable):  # a trace the others answer without
            continue
    result = version_regressions(records)
    steps = step_regressions(records, result)
    return {"workload": workload, "type": device_type, "traces_read": len(records), **result, "step_changes": steps}


def version_choices(workload: str = "", device_type: str = "") -> list[dict[str, Any]]:
    """(workload, device type) pairs that have ready traces with a software version; only
    those of `workload` or `device_type` when one is given."""
    traces = Trace.objects.filter(status=TraceStatus.READY).exclude(sw_version="").exclude(workload="")
    if workload:
        traces = traces.filter(workload=workload)
    if device_type:
        traces = traces.filter(device_type=device_type)
    pairs = (
        traces.values_list("workload", "device_type")
        .distinct()
        .order_by("workload", "device_type")
    )
    return [{"workload": w, "type": t} for w, t in pairs]

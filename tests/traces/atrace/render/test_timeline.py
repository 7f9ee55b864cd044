"""The timeline windowing: no event lost, the critical path always marked, bounded size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.workloads.tracing import capture
from tests.support.examples import examples
from traces.atrace import Kind, TraceBuilder, critical_path
from traces.atrace.io import blocks
from traces.atrace.render.timeline import timeline, window
from traces.atrace.render.timeline_layout import build_layout, load_layout


@st.composite
def traces(draw):
    """A host thread with nested operators launching kernels on two streams, plus noise."""
    b = TraceBuilder(source="test")
    host = b.track("host", 1, process_name="host", thread_name="main")
    streams = [b.track("gpu", s, process_name="GPU 0", thread_name=f"stream {s}") for s in (7, 8)]
    t, corr = 0, 0
    for _ in range(draw(st.integers(1, 25))):
        dur = draw(st.integers(0, 400))
        b.add("op", t, dur, host, kind=Kind.HOST_OP)
        if dur >= 3 and draw(st.booleans()):
            corr += 1
            b.add("launch", t + 1, 1, host, kind=Kind.RUNTIME, corr=corr)
            k_start = t + 1 + draw(st.integers(0, 50))
            stream = streams[draw(st.integers(0, 1))]
            b.add("kernel", k_start, draw(st.integers(0, 300)), stream, kind=Kind.KERNEL, corr=corr)
        t += dur + draw(st.integers(0, 60))
    # Overlapping, unnested kernels on one stream (a profiler can record that).
    for _ in range(draw(st.integers(0, 6))):
        b.add("stray", draw(st.integers(0, t + 10)), draw(st.integers(0, 200)), streams[1],
              kind=Kind.KERNEL)
    return b.build()


@st.composite
def windows(draw, trace):
    t0, t1 = trace.span()
    start = draw(st.integers(t0 - 50, t1 + 10))
    end = start + draw(st.integers(1, max(t1 - t0, 1) + 100))
    return start, end, draw(st.integers(1, 2000))


def _overlapping(trace, start, end):
    ts, te = trace.ts, trace.end
    inside = (ts < end) & ((te > start) | ((te == ts) & (ts >= start)))
    return np.flatnonzero(inside & trace.is_slice)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_windowing_keeps_every_event_marks_the_path_and_stays_bounded(data):
    trace = data.draw(traces())
    path = critical_path(trace)
    layout = build_layout(trace, path)
    start, end, width = data.draw(windows(trace))
    max_bars = data.draw(st.integers(len(layout.rows), 60))
    w = window(layout, start, end, width, max_bars=max_bars)
    bars = w.bars
    inside = _overlapping(trace, start, end)

    # Bounded, and inside the window.
    assert len(bars) <= max_bars
    assert (bars.start >= start).all() and (bars.end <= end).all()
    # No event lost: counts and time add up to what lies in the window.
    assert int(bars.count.sum()) == len(inside)
    clipped = np.minimum(trace.end[inside], end) - np.maximum(trace.ts[inside], start)
    assert int(bars.busy.sum()) == int(clipped.sum())
    # Each critical-path event in the window lies in a bar of its lane that says so.
    crit = np.intersect1d(inside, path.events)
    assert int(bars.crit.sum()) == len(crit)
    row_of = np.asarray(layout.columns["row"])[layout.position[crit]]
    for e, row in zip(crit.tolist(), row_of.tolist()):
        s, t = max(int(trace.ts[e]), start), min(int(trace.end[e]), end)
        holder = (bars.row == row) & (bars.start <= s) & (bars.end >= t) & (bars.crit > 0)
        assert holder.any(), f"critical event {e} is in no marked bar"
    # A single-event bar names its own event.
    single = bars.count == 1
    assert np.isin(bars.event[single], inside).all()


@pytest.fixture(scope="module")
def gpu_capture():
    trace = capture("gpu", 0.3, seed=5)
    return trace, critical_path(trace)


def test_whole_capture_fits_a_1600_pixel_window_and_zoom_shows_single_events(gpu_capture):
    trace, path = gpu_capture
    layout = build_layout(trace, path)
    whole = window(layout, width_px=1600, max_bars=5000)
    assert len(whole.bars) <= 5000
    assert whole.bars.count.sum() == int(trace.is_slice.sum())
    assert (whole.bars.count > 1).any(), "a whole capture at 1,600 px must merge something"
    # Zoomed onto one critical kernel: it is drawn alone and marked.
    kernels = np.intersect1d(path.events, np.flatnonzero(trace.kind == Kind.KERNEL))
    k = int(kernels[len(kernels) // 2])
    zoom = window(layout, int(trace.ts[k]), int(trace.end[k]), 1600)
    bar = np.flatnonzero(zoom.bars.event == k)
    assert len(bar) == 1 and zoom.bars.count[bar[0]] == 1 and zoom.bars.crit[bar[0]] == 1
    d = zoom.to_dict()
    assert d["events_in_window"] == int(zoom.bars.count.sum())
    assert d["names"][d["bars"]["name"][int(bar[0])]] == trace.names([k])[0]


def test_saved_layout_answers_like_the_fresh_one_and_details_an_event(gpu_capture, tmp_path):
    trace, path = gpu_capture
    layout = build_layout(trace, path)
    layout.save(tmp_path / "timeline")
    loaded = load_layout(tmp_path / "timeline")
    t0, t1 = trace.span()
    mid = (t0 + t1) // 2
    assert window(loaded, mid, mid + 400_000, 900).to_dict() == window(
        layout, mid, mid + 400_000, 900
    ).to_dict()
    assert window(loaded, t0, t1, 1600).to_dict() == window(layout, t0, t1, 1600).to_dict()
    # Indices and ids are stored in 32 bits where they fit; the times stay 64-bit.
    assert loaded.columns["event"].dtype == np.int32 and loaded.columns["link"].dtype == np.int32
    assert loaded.position.dtype == np.int32 and loaded.columns["ts"].dtype == np.int64
    kernel = int(np.flatnonzero(trace.kind == Kind.KERNEL)[3])
    detail = loaded.event_detail(kernel)
    assert detail["kind"] == "kernel" and detail["side"] == "device"
    launcher = detail["launched_by"]["index"]
    assert trace.names([launcher])[0] in ("rtLaunchKernel", "rtMemcpyAsync")
    assert loaded.event_detail(launcher)["launched"]["index"] == kernel
    host_op = int(np.flatnonzero(trace.kind == Kind.HOST_OP)[0])
    assert loaded.event_detail(host_op)["args"] == trace.args.get(host_op)
    with pytest.raises(KeyError, match="no slice with index"):
        loaded.event_detail(len(trace) + 5)


@pytest.mark.parametrize("stored", ["block-compressed", "plain"])
def test_saved_layout_reads_args_from_a_blob_already_stored_beside_it(gpu_capture, tmp_path, stored):
    """The drill-down stores the args block-compressed (a trace stored before, plain): the
    layout refers to that file rather than writing its own copy."""
    trace, path = gpu_capture
    layout = build_layout(trace, path)
    folder = tmp_path / "trace"
    folder.mkdir()
    blob = bytes(trace.args.blob)
    (folder / "args.bin").write_bytes(blocks.compress(blob, block=4096) if stored == "block-compressed" else blob)
    layout.save(folder, "view.timeline.", args_file="args.bin")
    assert not {"view.timeline.args_blob.npy", "view.timeline.args.bin"} & {p.name for p in folder.iterdir()}
    loaded = load_layout(folder, "view.timeline.")
    for e in np.flatnonzero(trace.is_slice)[:: max(len(trace) // 50, 1)].tolist():
        assert loaded.event_detail(e)["args"] == trace.args.get(e)
    # A file that is not the blob (another size) is not trusted: the layout keeps its own
    # copy, block-compressed, and reads the same args from it.
    (folder / "other.bin").write_bytes(b"{}")
    layout.save(folder, "again.", args_file="other.bin")
    own = folder / "again.args.bin"
    assert blocks.is_blocks(own.read_bytes()) and own.stat().st_size < len(blob) / 4
    again = load_layout(folder, "again.")
    for e in np.flatnonzero(trace.is_slice)[:: max(len(trace) // 50, 1)].tolist():
        assert again.event_detail(e)["args"] == trace.args.get(e)


@pytest.mark.parametrize(
    ("start", "end", "width", "message"),
    [(10, 10, 100, "must be after start"), (5, 0, 100, "must be after start"), (0, 10, 0, "width_px")],
)
def test_bad_window_is_refused_with_what_is_wrong(gpu_capture, start, end, width, message):
    trace, path = gpu_capture
    layout = build_layout(trace, path)
    with pytest.raises(ValueError, match=message):
        window(layout, start, end, width)


def test_timeline_of_a_loaded_trace_is_its_layouts_window(gpu_capture):
    trace, path = gpu_capture
    t0, t1 = trace.span()
    start, end = t0 + (t1 - t0) // 4, t0 + (t1 - t0) // 2
    direct = timeline(trace, start_ns=start, end_ns=end, width_px=700, max_bars=300, max_edges=50, path=path)
    stored = window(build_layout(trace, path), start, end, 700, max_bars=300, max_edges=50)
    assert direct.to_dict() == stored.to_dict()
    assert len(direct.bars) <= 300 and len(direct.edges["src"]) <= 50 < direct.edges_total
    # Without limits (the caller gives none): merged at one pixel, every path edge kept.
    free = timeline(trace, path=path)
    assert free.merge_px == 1.0 and len(free.edges["src"]) == free.edges_total



def test_a_column_past_32_bits_is_stored_as_it_is():
    from traces.atrace.render.timeline_layout import _narrowed

    assert _narrowed(np.array([-1, 5, 2**31 - 1])).dtype == np.int32
    assert _narrowed(np.array([-1, 2**40])).dtype == np.int64
    assert _narrowed(np.array([-(2**31) - 1])).dtype == np.int64
    assert _narrowed(np.zeros(0, np.int64)).dtype == np.int32

"""An emulated serving run as files: its device trace (Chrome JSON) and its spans (OTLP JSON
lines, as a Collector's file exporter writes them), uploaded into a test's database."""

from __future__ import annotations

import copy
import functools
import io
import tempfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile

from emulator.serving.engine import ServingConfig
from emulator.serving.spans import emit_run, memory_provider, resource_for, write_otlp_json
from emulator.serving.trace import serve
from traces import writers
from traces.atrace import chrome_trace_bytes

T0 = 1_700_000_000_000_000_000


def serving_files(tmp_path, *problems, seed=7, duration=3.0, t0_ns=T0):
    """(trace bytes, spans file path, run): the run's files made once per test process (a
    seeded run is the same every time), the spans written into this test's tmp_path and the
    run a copy of its own."""
    raw, spans_text, run = _served(frozenset(problems), seed, duration, t0_ns)
    spans = tmp_path / f"spans-{seed}.jsonl"
    spans.write_text(spans_text)
    return raw, spans, copy.deepcopy(run)


@functools.cache
def _served(problems: frozenset, seed: int, duration: float, t0_ns: int) -> tuple[bytes, str, object]:
    trace, run = serve(duration, ServingConfig(problems=problems, seed=seed), t0_ns=t0_ns)
    provider, exporter = memory_provider(resource_for("h", "ENX-1"))
    emit_run(provider.get_tracer("t"), run)
    with tempfile.TemporaryDirectory() as folder:
        spans = Path(folder) / "spans.jsonl"
        write_otlp_json(exporter.get_finished_spans(), spans)
        return chrome_trace_bytes(trace), spans.read_text(), run


def uploaded_serving_trace(user, tmp_path, *problems, seed=7, duration=3.0):
    """A serving run's trace uploaded and analysed, and its spans file and run."""
    raw, spans, run = serving_files(tmp_path, *problems, seed=seed, duration=duration)
    row = writers.accept_upload(SimpleUploadedFile("serving.json", raw), user, name=f"serving {seed}")
    writers.analyse(row.pk)
    row.refresh_from_db()
    assert row.status == "ready", row.error
    return row, spans, run


def spans_upload(path) -> io.BytesIO:
    f = io.BytesIO(path.read_bytes())
    f.name = path.name
    return f

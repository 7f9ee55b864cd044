"""Helpers of the trace-view tests: emulated captures uploaded and analysed in-process."""

import functools

from django.core.files.uploadedfile import SimpleUploadedFile

from emulator.workloads.tracing import capture
from traces import writers
from traces.atrace import chrome_trace_bytes


def emulated_trace(user, *, version="2.0", seed=1, device_type="gpu", duration_s=0.03, device=None, problems=()):
    """An emulated capture uploaded and analysed (its meta names type, workload, version),
    with the emulator's ``problems`` if asked."""
    data = _capture_file(device_type, duration_s, version, seed, tuple(problems))
    f = SimpleUploadedFile(f"{device_type}-{version}-{seed}.json", data)
    row = writers.accept_upload(f, user, name=f"{device_type} {version} #{seed}", device=device, sw_version=version)
    writers.analyse(row.pk)
    row.refresh_from_db()
    assert row.status == "ready", row.error
    return row


@functools.cache
def _capture_file(device_type: str, duration_s: float, version: str, seed: int, problems: tuple[str, ...]) -> bytes:
    """The Chrome-trace file of an emulated capture, made once per test process for each set
    of arguments (seeded: the same every time); the upload and its analysis are each test's own."""
    return chrome_trace_bytes(capture(device_type, duration_s, sw_version=version, seed=seed, problems=problems))

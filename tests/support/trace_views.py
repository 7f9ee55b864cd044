"""Helpers of the trace-view tests: emulated captures uploaded and analysed in-process."""

from django.core.files.uploadedfile import SimpleUploadedFile

from emulator.workloads.tracing import capture
from traces import writers
from traces.atrace import chrome_trace_bytes


def emulated_trace(user, *, version="2.0", seed=1, device_type="gpu", duration_s=0.03, device=None, problems=()):
    """An emulated capture uploaded and analysed (its meta names type, workload, version),
    with the emulator's ``problems`` if asked."""
    trace = capture(device_type, duration_s, sw_version=version, seed=seed, problems=problems)
    f = SimpleUploadedFile(f"{device_type}-{version}-{seed}.json", chrome_trace_bytes(trace))
    row = writers.accept_upload(f, user, name=f"{device_type} {version} #{seed}", device=device, sw_version=version)
    writers.analyse(row.pk)
    row.refresh_from_db()
    assert row.status == "ready", row.error
    return row

"""A trace's files on the local folder: each result replaces the earlier one whole (a reader
sees the old file or the new one, never part of one), a writer that fails midway leaves the
old file and no temporary file, and deleting a trace removes what a killed writer left."""

import errno
import io
import os
import stat
from pathlib import Path

import pytest

from tests.support.trace_views import emulated_trace
from traces.atrace.io import blocks
from traces.store import page_data
from traces.store.files import SUMMARY, TraceFiles

pytestmark = pytest.mark.django_db
OLD, NEW = b'{"old": true}' * 1000, b'{"new": true}' * 200_000  # the new one takes several reads


class Source(io.RawIOBase):
    """A non-seekable source of ``data`` in 1 MB reads; ``during(n)`` runs before read n;
    ``fail_at``: the read that raises (a disk that filled, a source that broke)."""

    def __init__(self, data: bytes, during=None, fail_at: int | None = None) -> None:
        self.data, self.during, self.fail_at, self.reads = data, during, fail_at, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        if self.during is not None:
            self.during(self.reads)
        if self.reads == self.fail_at:
            raise OSError(28, "No space left on device")
        n = len(self.data) if n is None or n < 0 else n
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


def _on_disk(files: TraceFiles) -> list[str]:
    """Every entry of the trace's folder, hidden ones too."""
    return sorted(p.name for p in files.local_folder().iterdir())


@pytest.mark.parametrize("fsync", [True, False])
def test_a_saved_result_replaces_the_old_one_whole(trace_storage, settings, monkeypatch, fsync):
    settings.TRACE_STORAGE_FSYNC = fsync
    flushed = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(fd) or real_fsync(fd))
    files = TraceFiles(31)
    files.save(SUMMARY, OLD)
    assert len(flushed) == (1 if fsync else 0)  # flushed to the disk before the rename, when asked
    seen = []
    source = Source(NEW, during=lambda n: n == 2 and seen.append(files.open(SUMMARY).read()))
    files.save_stream(files.name(SUMMARY), source)
    assert source.reads > 2
    assert seen == [OLD]  # mid-write a reader still finds the old file, whole
    assert files.open(SUMMARY).read() == NEW
    assert _on_disk(files) == [SUMMARY] and files.listdir() == [SUMMARY]
    mode = stat.S_IMODE(Path(trace_storage.path(files.name(SUMMARY))).stat().st_mode)
    assert mode == settings.FILE_UPLOAD_PERMISSIONS  # as the storage's own saves set it


@pytest.mark.parametrize("interruption", [OSError, KeyboardInterrupt])
def test_a_writer_failing_midway_leaves_the_old_file_and_no_temporary_one(trace_storage, interruption):
    files = TraceFiles(32)
    files.save(SUMMARY, OLD)

    def fail(n):
        if n == 3:
            raise interruption("interrupted")

    with pytest.raises(interruption):
        files.save_stream(files.name(SUMMARY), Source(NEW, during=fail))
    assert files.open(SUMMARY).read() == OLD
    assert _on_disk(files) == [SUMMARY]
    with pytest.raises(OSError, match="No space"):
        files.save_stream(files.name("requests.json"), Source(NEW, fail_at=2))
    assert _on_disk(files) == [SUMMARY]  # no part of a first copy either


def test_a_multipart_upload_s_own_file_is_moved_into_place_not_copied(trace_storage, monkeypatch):
    from django.core.files.uploadedfile import TemporaryUploadedFile

    files = TraceFiles(35)
    files.save("raw.json", OLD)
    upload = TemporaryUploadedFile("big.json", "application/json", len(NEW), None)
    upload.write(NEW)
    upload.flush()
    inode = Path(upload.temporary_file_path()).stat().st_ino
    files.save_stream(files.name("raw.json"), upload)
    stored = files.local_folder() / "raw.json"
    assert stored.stat().st_ino == inode and stored.read_bytes() == NEW  # renamed: no second copy of the bytes
    upload.close()  # (Django's own clean-up finds it gone)
    assert _on_disk(files) == ["raw.json"]
    # On another file system it is copied, whole, the same way as any stream.
    other = TemporaryUploadedFile("big.json", "application/json", len(OLD), None)
    other.write(OLD)
    real = os.replace

    def across_devices(src, dst, *args, **kwargs):
        if str(src) == other.temporary_file_path():
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", across_devices)
    files.save_stream(files.name("raw.json"), other)
    assert stored.read_bytes() == OLD and _on_disk(files) == ["raw.json"]
    assert Path(other.temporary_file_path()).exists()  # copied, left for Django to delete
    other.close()


def test_a_first_save_makes_the_trace_s_folder(trace_storage):
    files = TraceFiles(33)
    assert files.local_folder() is not None and not files.local_folder().exists()
    files.save("report.json", b"{}")
    assert files.listdir() == ["report.json"]


def test_the_views_replace_the_old_ones_whole_and_an_interrupted_write_leaves_them(operator, trace_storage,
                                                                                  monkeypatch, settings):
    settings.TRACE_STORAGE_FSYNC = True  # (as deployed: each view flushed before its rename)
    trace = emulated_trace(operator, seed=3)
    files = TraceFiles(trace.pk)
    folder = files.local_folder()
    before = {name: (folder / name).read_bytes() for name in _on_disk(files)}
    assert any(name.startswith("view.") for name in before)
    real = page_data.compute_page_data

    class Interrupted:
        """Atrace's page data whose save fails midway: one file cut short, then the error."""

        def __init__(self, pages) -> None:
            self.pages = pages

        def save(self, directory, *, args_file=None):
            names = self.pages.save(directory, args_file=args_file)
            with (Path(directory) / names[0]).open("r+b") as f:
                f.truncate(1)
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(page_data, "compute_page_data", lambda *a, **k: Interrupted(real(*a, **k)))
    from traces import atrace

    with files.storage.open(trace.raw_file) as fh:
        parsed = atrace.read_trace(fh)
    with pytest.raises(OSError):
        page_data.store_page_data(files, parsed)
    assert {name: (folder / name).read_bytes() for name in _on_disk(files)} == before  # nothing replaced or left
    monkeypatch.setattr(page_data, "compute_page_data", real)
    stored = page_data.store_page_data(files, parsed)
    assert stored > 0 and _on_disk(files) == sorted(before)
    assert page_data.timeline(trace, {"start_us": 0, "end_us": 1e9, "width_px": 400})["rows"]


def test_deleting_a_trace_removes_what_a_killed_writer_left(trace_storage):
    files = TraceFiles(34)
    files.save(SUMMARY, OLD)
    folder = files.local_folder()
    (folder / f".{SUMMARY}.0123456789ab.part").write_bytes(b"half")  # a writer killed mid-copy
    (folder / ".views-abc").mkdir()
    (folder / ".views-abc" / "view.flame.json").write_bytes(b"{")
    files.delete_all()
    assert not folder.exists()


DAMAGEABLE = [
    (SUMMARY, "breakdown/"),
    ("instances.bin", "instances/?op={op}&side=device"),
    ("view.flame.json", "flame/"),
    ("view.timeline.layout.json", "timeline/"),
    ("view.paths.json", "critical-path/"),
    ("args.bin", "instances/?op={op}&side=device"),
]


def test_a_result_that_cannot_be_read_whole_is_503_saying_so(api_client, client, viewer, operator, trace_storage):
    """A result damaged on the disk (or cut short before results were written whole) is a
    503 naming it, with Retry-After: never a 500. The trace's page still opens."""
    trace = emulated_trace(operator, seed=4)
    api_client.force_authenticate(viewer)
    client.force_login(viewer)
    for file, url in DAMAGEABLE:  # one analysed trace, each of its results damaged in turn
        if "{op}" in url:  # read once whole (a result read whole is kept, so not before its own turn)
            url = url.format(op=api_client.get(f"/api/traces/{trace.pk}/breakdown/?side=device").data["results"][0]["op"])
        path = TraceFiles(trace.pk).local_folder() / file
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2 - 1])
        answer = api_client.get(f"/api/traces/{trace.pk}/{url}")
        assert answer.status_code == 503, (file, answer.content[:300])
        assert answer["Retry-After"] == "30" and "could not be read" in answer.json()["detail"], file
        assert client.get(f"/traces/{trace.pk}/").status_code == 200, file
        path.write_bytes(whole)
        assert api_client.get(f"/api/traces/{trace.pk}/{url}").status_code == 200, file


def test_arguments_are_stored_block_compressed_and_a_plain_file_of_before_still_reads(
        api_client, viewer, operator, trace_storage):
    """The drill-down's and the timeline's args are one block-compressed file; a trace stored
    before the format (its args plain) answers the same."""
    trace = emulated_trace(operator, seed=5)
    api_client.force_authenticate(viewer)
    op = api_client.get(f"/api/traces/{trace.pk}/breakdown/?side=host&kind=host_op").data["results"][0]["op"]
    urls = [f"/api/traces/{trace.pk}/instances/?op={op}&kind=host_op&limit=50", f"/api/traces/{trace.pk}/events/0/"]
    path = TraceFiles(trace.pk).local_folder() / "args.bin"
    stored = path.read_bytes()
    assert blocks.is_blocks(stored)
    assert not (path.parent / "view.timeline.args.bin").exists()  # the timeline refers to it, no copy
    plain = bytes(blocks.open_bytes(stored)[:])
    assert len(stored) * 4 < len(plain)
    answers = [api_client.get(url).json() for url in urls]
    assert any(r["args"] for r in answers[0]["results"])
    path.write_bytes(plain)
    assert [api_client.get(url).json() for url in urls] == answers
    path.write_bytes(stored[:20])  # cut inside its header: every read of args says so
    for url in urls:
        answer = api_client.get(url)
        assert answer.status_code == 503 and "could not be read" in answer.json()["detail"], url


def test_a_job_s_results_that_cannot_be_read_whole_say_so(trace_storage):
    from types import SimpleNamespace

    from traces.jobs import results as job_results
    from traces.store.files import REPORT, TIMELINE, JobFiles, ResultUnreadable

    job, files = SimpleNamespace(pk=77), JobFiles(77)
    files.save(REPORT, b'{"straggler": {"rank"')
    files.save(TIMELINE, b"PK\x03\x04 cut short")
    with pytest.raises(ResultUnreadable, match="cross-rank report of job 77 could not be read"):
        job_results.read_report(job)
    with pytest.raises(ResultUnreadable, match="collective timeline of job 77"):
        job_results.timeline(job)
    files.delete_all()
    with pytest.raises(FileNotFoundError):  # a missing file is each reader's to explain
        job_results.read_report(job)

"""The upload forms send files through the resumable upload API in chunks, with progress,
and resume after a chunk's connection drops (issue 25, point 1), in a real Chromium."""

import hashlib
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import sign_in
from tests.support.tracegen import write_kineto_trace
from traces.choices import TraceStatus
from traces.models import Trace, Upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records every XHR's method and URL in sessionStorage (it outlives the page's navigation),
# and makes the first send of the chunk at offset 1 MB fail as a dropped connection does.
DROP_ONE_CHUNK = """
const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
sessionStorage.setItem("xhr", "[]");
XMLHttpRequest.prototype.open = function (method, url, ...rest) {
  this._seen = method + " " + url;
  return open.call(this, method, url, ...rest);
};
XMLHttpRequest.prototype.send = function (body) {
  const seen = JSON.parse(sessionStorage.getItem("xhr"));
  const drop = this._seen.endsWith("offset=1048576") && !seen.some((s) => s.includes("offset=1048576"));
  seen.push(this._seen + (drop ? " (dropped)" : ""));
  sessionStorage.setItem("xhr", JSON.stringify(seen));
  if (drop) return setTimeout(() => this.onerror(new Event("error")), 10);
  return send.call(this, body);
};
window._progress = [];
new MutationObserver(() => window._progress.push(document.getElementById("upload-progress").value))
  .observe(document.getElementById("upload-progress"), { attributes: true });
setInterval(() => window._progress.push(document.getElementById("upload-progress").value), 5);
"""


@pytest.fixture(scope="module")
def stack_settings() -> dict:
    return {"TRACE_UPLOAD_CHUNK_MB": 1}


def test_the_upload_page_sends_chunks_resumes_a_dropped_one_and_shows_progress(browser, trace_stack, operator, tmp_path):
    source = tmp_path / "chunked.json"
    write_kineto_trace(source, 15_000, seed=5)
    size = source.stat().st_size
    assert size > 3 << 20
    sign_in(browser, trace_stack, "otto")
    browser.get(f"{trace_stack}/traces/upload/")
    browser.execute_script(DROP_ONE_CHUNK)
    browser.find_element(By.ID, "upload-file").send_keys(str(source))
    browser.find_element(By.ID, "upload-submit").click()
    progress = []
    wait = WebDriverWait(browser, 90, poll_frequency=0.05)

    def left_the_page(b):
        try:
            return on_the_trace_page(b)
        except StaleElementReferenceException:  # the page is going
            return False

    def on_the_trace_page(b):
        if "/traces/upload/" in b.current_url:
            progress.extend(b.execute_script("return window._progress || []"))
            error = b.find_element(By.ID, "upload-error").text
            assert not error, (error, b.execute_script("return sessionStorage.getItem('xhr')"), b.get_log("browser"))[1:]
            return False
        return "/traces/" in b.current_url

    wait.until(left_the_page)
    seen = browser.execute_script("return JSON.parse(sessionStorage.getItem('xhr'))")
    puts = [s for s in seen if s.startswith("PUT /api/uploads/")]
    chunks = -(-size // (1 << 20))
    assert len(puts) == chunks + 1, seen  # every chunk, and the dropped one once more
    assert any("(dropped)" in s for s in puts) and sum("offset=1048576" in s for s in puts) == 2
    assert len({round(float(v), 2) for v in progress if 0 < float(v) < 1}) >= 2, progress
    trace = Trace.objects.get()
    stored = Path(_location()) / trace.raw_file
    assert hashlib.sha256(stored.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    assert not Upload.objects.exists()
    WebDriverWait(browser, 90).until(lambda b: Trace.objects.get().status == TraceStatus.READY)


def _location() -> str:
    from django.conf import settings

    return settings.STORAGES["traces"]["OPTIONS"]["location"]

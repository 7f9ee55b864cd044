// Uploads, for every page that sends trace files: each file goes through the resumable
// upload API (/api/uploads/) in chunks, so a file of any size streams to the server's trace
// storage, a dropped connection resumes from the bytes the server has stored, and the
// progress bar moves as bytes leave. Then the page's own request makes the trace or the job
// from the finished uploads (see uploadForm).
import { csrfToken, decodeBody, errorMessage, fetchJSON } from "./http.js";

const UPLOADS_URL = "/api/uploads/";
const RETRIES = 5; // tries of one chunk after a network error, each after a longer wait

class UploadError extends Error {}

// One chunk as a PUT, through XHR for its upload progress (fetch has none).
function putChunk(url, offset, blob, onBytes) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("PUT", `${url}?offset=${offset}`);
    request.setRequestHeader("X-CSRFToken", csrfToken());
    request.setRequestHeader("Accept", "application/json");
    request.setRequestHeader("Content-Type", "application/octet-stream");
    request.upload.onprogress = (e) => onBytes(e.loaded);
    request.onload = () => resolve({
      status: request.status,
      data: decodeBody(request.responseText, request.statusText),
      retryAfter: Number(request.getResponseHeader("Retry-After")) || 0,
    });
    request.onerror = () => reject(new Error("network"));
    request.send(blob);
  });
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Send one file; resolves to its finished upload's id. onProgress(bytesSentOfThisFile).
export async function sendFile(file, onProgress = () => {}) {
  const started = await fetchJSON(UPLOADS_URL, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ filename: file.name, size: file.size }),
  });
  if (!started.ok) throw new UploadError(`${file.name}: ${errorMessage(started.data)}`);
  const { url, chunk_max_bytes: chunkBytes } = started.data;
  let offset = started.data.received;
  let failures = 0;
  while (offset < file.size) {
    const end = Math.min(offset + chunkBytes, file.size);
    let answer;
    try {
      answer = await putChunk(url, offset, file.slice(offset, end), (sent) => onProgress(offset + sent));
    } catch {
      if (++failures > RETRIES) throw new UploadError(`${file.name}: the upload did not reach the server.`);
      await pause(500 * 2 ** failures);
      const state = await fetchJSON(url).catch(() => null); // where the server's bytes end
      if (state && state.ok) offset = state.data.received;
      continue;
    }
    if (answer.status === 429 && failures++ < RETRIES * 4) {
      await pause(1000 * (answer.retryAfter || 2)); // the server receives as many uploads as it may: wait
      continue;
    }
    if (answer.status !== 200) throw new UploadError(`${file.name}: ${errorMessage(answer.data)}`);
    failures = 0;
    offset = answer.data.received;
    onProgress(offset);
  }
  const finished = await fetchJSON(`${url}finish/`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ size: file.size }),
  });
  if (!finished.ok) throw new UploadError(`${file.name}: ${errorMessage(finished.data)}`);
  return started.data.id;
}

// Wire a page's upload form: files() picks the files, body(ids) the JSON that makes the
// trace or job at createUrl from the uploads' ids; on success the page goes to its url.
export function uploadForm({ form, progress, error, submit, createUrl, files, body }) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    let picked;
    try {
      picked = files();
    } catch (e) {
      error.textContent = e.message;
      return;
    }
    const total = picked.reduce((sum, f) => sum + f.size, 0) || 1;
    let done = 0;
    progress.hidden = false;
    progress.value = 0;
    submit.disabled = true;
    const ids = [];
    try {
      for (const file of picked) {
        ids.push(await sendFile(file, (sent) => { progress.value = (done + sent) / total; }));
        done += file.size;
      }
      const made = await fetchJSON(createUrl, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body(ids)),
      });
      if (!made.ok) throw new UploadError(errorMessage(made.data));
      window.location.assign(made.data.url);
    } catch (e) {
      error.textContent = e instanceof UploadError ? e.message : "The upload did not reach the server.";
      // Drop what was sent: it holds room in the storage budget until then.
      for (const id of ids) fetchJSON(`${UPLOADS_URL}${id}/`, { method: "DELETE" }).catch(() => {});
    } finally {
      progress.hidden = true;
      submit.disabled = false;
    }
  });
}

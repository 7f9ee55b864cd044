// Upload page: send the file through the resumable upload API (static/…/lib/upload.js),
// make the trace from it and go to the trace's page; a refused file shows the server's words.
import { uploadForm } from "../lib/upload.js";

const form = document.getElementById("upload-form");

uploadForm({
  form,
  progress: document.getElementById("upload-progress"),
  error: document.getElementById("upload-error"),
  submit: document.getElementById("upload-submit"),
  createUrl: document.getElementById("upload").dataset.apiUrl,
  files: () => [...document.getElementById("upload-file").files],
  body: ([upload]) => ({ upload, name: form.elements.name.value, sw_version: form.elements.sw_version.value }),
});

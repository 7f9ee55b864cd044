// Jobs page: upload one trace per rank (files, or every file of a folder) as one job, then
// go to the job's page; a refused file shows which one and why.
import { csrfToken, decodeBody, errorMessage } from "../lib/http.js";

const section = document.getElementById("job-upload");

if (section) {
  const form = document.getElementById("job-upload-form");
  const error = document.getElementById("job-upload-error");
  const progress = document.getElementById("job-upload-progress");
  const submit = document.getElementById("job-upload-submit");

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    error.textContent = "";
    const body = new FormData();
    const picked = [...document.getElementById("job-files").files, ...document.getElementById("job-folder").files];
    const traces = picked.filter((f) => /\.json(\.gz)?$/i.test(f.name));
    if (!traces.length) {
      error.textContent = "Choose one trace file per rank (.json or .json.gz), or a folder of them.";
      return;
    }
    for (const file of traces) body.append("files", file, file.name);
    body.append("name", form.elements.name.value);
    const request = new XMLHttpRequest(); // XHR for upload progress, which fetch lacks
    request.open("POST", section.dataset.apiUrl);
    request.setRequestHeader("X-CSRFToken", csrfToken());
    request.setRequestHeader("Accept", "application/json");
    request.upload.onprogress = (e) => {
      if (e.lengthComputable) progress.value = e.loaded / e.total;
    };
    const done = () => {
      progress.hidden = true;
      submit.disabled = false;
    };
    request.onload = () => {
      const data = decodeBody(request.responseText, request.statusText);
      done();
      if (request.status === 202) window.location.assign(data.url);
      else error.textContent = errorMessage(data);
    };
    request.onerror = () => {
      done();
      error.textContent = "The upload did not reach the server.";
    };
    progress.hidden = false;
    submit.disabled = true;
    request.send(body);
  });
}

// Upload page: send the file to the API (multipart, with the CSRF token) and go to the
// trace's page; a refused file shows the engine's message.
import { csrfToken, decodeBody, errorMessage } from "../lib/http.js";

const section = document.getElementById("upload");
const form = document.getElementById("upload-form");
const error = document.getElementById("upload-error");
const progress = document.getElementById("upload-progress");

form.addEventListener("submit", (event) => {
  event.preventDefault();
  error.textContent = "";
  const body = new FormData(form);
  body.delete("csrfmiddlewaretoken");
  const request = new XMLHttpRequest();  // XHR for upload progress, which fetch lacks
  request.open("POST", section.dataset.apiUrl);
  request.setRequestHeader("X-CSRFToken", csrfToken());
  request.setRequestHeader("Accept", "application/json");
  request.upload.onprogress = (e) => {
    if (e.lengthComputable) progress.value = e.loaded / e.total;
  };
  request.onload = () => {
    const data = decodeBody(request.responseText, request.statusText);
    progress.hidden = true;
    document.getElementById("upload-submit").disabled = false;
    if (request.status === 201) {
      window.location.assign(data.url);
    } else {
      error.textContent = errorMessage(data);
    }
  };
  request.onerror = () => {
    progress.hidden = true;
    document.getElementById("upload-submit").disabled = false;
    error.textContent = "The upload did not reach the server.";
  };
  progress.hidden = false;
  progress.value = 0;
  document.getElementById("upload-submit").disabled = true;
  request.send(body);
});

// Jobs page: upload one trace per rank (files, or every file of a folder) through the
// resumable upload API (lib/upload.js), make the job from them and go to its page; a refused
// file shows which one and why.
import { uploadForm } from "../lib/upload.js";

const section = document.getElementById("job-upload");

if (section) {
  const form = document.getElementById("job-upload-form");
  uploadForm({
    form,
    progress: document.getElementById("job-upload-progress"),
    error: document.getElementById("job-upload-error"),
    submit: document.getElementById("job-upload-submit"),
    createUrl: section.dataset.apiUrl,
    files: () => {
      const picked = [...document.getElementById("job-files").files, ...document.getElementById("job-folder").files];
      const traces = picked.filter((f) => /\.json(\.gz)?$/i.test(f.name));
      if (!traces.length) throw new Error("Choose one trace file per rank (.json or .json.gz), or a folder of them.");
      return traces;
    },
    body: (uploads) => ({ uploads, name: form.elements.name.value }),
  });
}

// The pages' one fetch helper for the project's own API: same-origin credentials, JSON, and
// the CSRF token on every request. It does not throw on an HTTP status: it resolves to
// {ok, status, data}, where data is the JSON body, or {detail: text} when the server answered
// with something else; errorMessage(data) says what went wrong in words.

// The CSRF token: from the csrftoken cookie (always the current one), else from a
// csrfmiddlewaretoken input on the page.
export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

// A response body as data: its JSON, or {detail: text} when it is not JSON.
export function decodeBody(text, statusText = "") {
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text || statusText };
  }
}

export async function fetchJSON(url, options = {}) {
  const headers = { "X-CSRFToken": csrfToken(), Accept: "application/json", ...(options.headers || {}) };
  const response = await fetch(url, { credentials: "same-origin", ...options, headers });
  const data = decodeBody(await response.text(), response.statusText);
  return { ok: response.ok, status: response.status, data };
}

// A POST of a JSON body: fetchJSON's answer.
export function postJSON(url, body) {
  return fetchJSON(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

// The message of an error body from the API: {"detail": "..."} or {"field": ["..."]}.
export function errorMessage(data) {
  if (!data) return "Something went wrong.";
  if (typeof data.detail === "string") return data.detail;
  return Object.entries(data)
    .map(([field, messages]) => `${field}: ${[].concat(messages).join(" ")}`)
    .join("; ");
}

// fetch() for the dashboard's own API: same-origin credentials, JSON, and the CSRF token
// (from the csrftoken cookie, or a csrfmiddlewaretoken input on the page) on every write.

function csrfToken() {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export class HttpError extends Error {
  constructor(response, body) {
    super((body && (body.detail || body.error)) || `${response.status} ${response.statusText}`);
    this.status = response.status;
    this.body = body;
  }
}

// Sends a request and returns the decoded JSON body (null for an empty one); a status
// outside 2xx throws an HttpError carrying the server's message.
export async function request(url, { method = "GET", body, headers = {} } = {}) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...headers } };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text };
    }
  }
  if (!response.ok) throw new HttpError(response, data);
  return data;
}

export const getJSON = (url) => request(url);
export const postJSON = (url, body) => request(url, { method: "POST", body });

// A websocket that reconnects by itself, and the "live" indicator in the top bar. The
// indicator is hidden until a page opens a live channel: a page without one (the requests
// pages, the offenders page) shows no "connecting…" that never ends.

// Close codes in the private range that mean "do not try again" (see fleet/consumers.py).
const REFUSED = (code) => code >= 4400 && code < 4500;
const WHY_REFUSED = { 4401: "signed out", 4403: "not allowed", 4404: "not found" };

function setLiveState(state, text) {
  const el = document.getElementById("live-indicator");
  if (el) {
    el.hidden = false;
    el.dataset.state = state;
    el.textContent = text;
  }
}

// Opens a websocket to `path` and calls onMessage(json) for each message, and onOpen() each
// time it (re)connects. After a drop it reconnects with a capped exponential back-off; after
// a refusal (4401/4403/4404) it stops. send(json) sends when the socket is open.
export function connect(path, onMessage, { onOpen } = {}) {
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;
  let socket = null;
  let stopped = false;

  setLiveState("connecting", "connecting…");

  function open() {
    socket = new WebSocket(`${scheme}://${window.location.host}${path}`);
    socket.onopen = () => {
      delay = 500;
      setLiveState("live", "live");
      if (onOpen) onOpen();
    };
    socket.onmessage = (event) => onMessage(JSON.parse(event.data));
    socket.onclose = (event) => {
      if (REFUSED(event.code)) {
        // Refused by the server (signed out, no permission, nothing there): retrying would
        // only be refused again.
        stopped = true;
        setLiveState("refused", WHY_REFUSED[event.code] || "refused");
        return;
      }
      setLiveState("reconnecting", "reconnecting…");
      if (!stopped) {
        setTimeout(open, delay);
        delay = Math.min(delay * 2, 10000);
      }
    };
  }
  open();
  return {
    send(message) {
      if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
    },
    close() {
      stopped = true;
      if (socket) socket.close();
    },
  };
}

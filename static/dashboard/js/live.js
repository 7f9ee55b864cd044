// Shared by every page: a websocket that reconnects by itself, and counter formatting
// that matches the server's template filters (dashboard/templatetags/asicmon.py).
"use strict";

window.Asicmon = (function () {
  const indicator = () => document.getElementById("live-indicator");

  function setLiveState(state, text) {
    const el = indicator();
    if (el) {
      el.dataset.state = state;
      el.textContent = text;
    }
  }

  // Open a websocket to `path` and call onMessage(json) for each message. After a drop it
  // reconnects with a capped exponential back-off; after a refusal (4401/4403/4404) it stops.
  function connect(path, onMessage) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    let delay = 500;
    let socket = null;
    let stopped = false;

    function open() {
      socket = new WebSocket(`${scheme}://${window.location.host}${path}`);
      socket.onopen = () => {
        delay = 500;
        setLiveState("live", "live");
      };
      socket.onmessage = (event) => onMessage(JSON.parse(event.data));
      socket.onclose = (event) => {
        if (event.code >= 4400 && event.code < 4500) {
          stopped = true;
          setLiveState("refused", "not allowed");
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
    return { close: () => { stopped = true; socket && socket.close(); } };
  }

  const blank = (v) => v === null || v === undefined || v === "";
  const format = {
    device_utilization: (v) => (blank(v) ? "–" : `${(v * 100).toFixed(0)}%`),
    temperature_c: (v) => (blank(v) ? "–" : `${Number(v).toFixed(1)} °C`),
    power_w: (v) => (blank(v) ? "–" : `${Number(v).toFixed(0)} W`),
    memory_used_bytes: (v) => (blank(v) ? "–" : `${(v / 2 ** 30).toFixed(1)} GiB`),
  };

  function setHealthBadge(el, health, reasons) {
    el.className = el.className.replace(/\bhealth-\w+/g, "").trim() + ` health-${health}`;
    el.textContent = health;
    el.title = (reasons || []).join(", ");
  }

  return { connect, format, setHealthBadge };
})();

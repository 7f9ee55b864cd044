// Fleet page: the paused-automation banner's "Resume automation" button (operators).
import { errorMessage, fetchJSON } from "../lib/http.js";

const banner = document.getElementById("automation-paused");
const button = document.getElementById("resume-automation");

if (banner && button) {
  button.addEventListener("click", async () => {
    const { ok, data } = await fetchJSON(banner.dataset.url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ paused: false, reason: "resumed from the fleet page" }),
    });
    if (ok && !data.paused) {
      banner.remove();
    } else {
      button.insertAdjacentText("afterend", ` ${errorMessage(data)}`);
    }
  });
}

// The console's only script (served from /assets, allowed by the page's
// Content-Security-Policy; no inline script anywhere). It keeps the
// overview's figures live and asks before destructive actions. Values are
// written with textContent: nothing from the server is parsed as markup.
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

const state = document.querySelector("section.state");
if (state) {
  const paused = state.getAttribute("data-paused") === "true";
  const refresh = async () => {
    try {
      const res = await fetch("/api/overview", { credentials: "same-origin" });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const data = await res.json();
      if (data.paused !== paused) {
        window.location.replace("/"); // paused or resumed elsewhere
        return;
      }
      for (const [field, value] of Object.entries(data.fields)) {
        for (const el of document.querySelectorAll(`[data-field="${field}"]`)) {
          el.textContent = value;
        }
      }
      const at = new Date(data.at).toLocaleTimeString();
      for (const el of document.querySelectorAll('[data-field="updated"]')) {
        el.textContent = `Last update ${at}.`;
        el.classList.remove("stale");
      }
    } catch (err) {
      for (const el of document.querySelectorAll('[data-field="updated"]')) {
        el.textContent = `Refresh failed (${err.message}); retrying.`;
        el.classList.add("stale");
      }
    }
  };
  window.setInterval(refresh, 3000);
}

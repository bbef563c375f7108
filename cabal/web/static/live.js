// Cabal's pages, live: the only script the server serves (its policy allows no other).
//
// 1. A page with data-live on <body> listens to that event stream. Each "update" event holds
//    the parts of the page that changed, rendered (and escaped) by the server; each replaces
//    the element #part-NAME, keeping what the person was doing there: text being typed, the
//    chosen option, open <details>, the focus.
// 2. A form with data-async is sent in the background with the page's CSRF token; the reply's
//    message shows in #toast, and the page itself changes through the stream, not a reload.
// Without this script every form still works (the server answers with a redirect).
(() => {
  "use strict";
  const csrf = document.querySelector('meta[name="cabal-csrf"]')?.content || "";

  function toast(text, failed) {
    const box = document.getElementById("toast");
    if (!box) return;
    box.textContent = text;
    box.className = failed ? "shown failed" : "shown";
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { box.className = ""; }, failed ? 8000 : 4000);
  }

  function swap(name, html) {
    const part = document.getElementById("part-" + name);
    if (!part) return;
    const kept = new Map();
    part.querySelectorAll("textarea[name], input[name]:not([type=hidden]), select[name]").forEach((field) => {
      kept.set(field.name, field.type === "checkbox" ? field.checked : field.value);
    });
    const open = [...part.querySelectorAll("details")].map((d) => d.open);
    const focused = part.contains(document.activeElement) ? document.activeElement.name : null;
    part.innerHTML = html;
    part.querySelectorAll("textarea[name], input[name]:not([type=hidden]), select[name]").forEach((field) => {
      if (!kept.has(field.name)) return;
      if (field.type === "checkbox") field.checked = kept.get(field.name);
      else if (field.tagName !== "SELECT" || [...field.options].some((o) => o.value === kept.get(field.name))) {
        field.value = kept.get(field.name);
      }
    });
    part.querySelectorAll("details").forEach((d, i) => { if (open[i]) d.open = true; });
    if (focused) part.querySelector(`[name="${CSS.escape(focused)}"]`)?.focus();
  }

  const live = document.body.dataset.live;
  if (live && window.EventSource) {
    const source = new EventSource(live + "?since=" + encodeURIComponent(document.body.dataset.key || ""));
    source.addEventListener("open", () => document.body.classList.remove("offline"));
    source.addEventListener("error", () => document.body.classList.add("offline"));
    source.addEventListener("update", (event) => {
      const update = JSON.parse(event.data);
      for (const [name, part] of Object.entries(update.parts)) swap(name, part.html);
      document.body.dataset.key = event.lastEventId;
    });
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-async")) return;
    event.preventDefault();
    const body = new FormData(form, event.submitter);
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const reply = await fetch(form.action, {
        method: "POST", body, credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
      });
      const said = await reply.json().catch(() => ({ error: reply.status + " " + reply.statusText }));
      if (reply.ok) {
        form.querySelectorAll("textarea").forEach((t) => { t.value = ""; });
        toast(said.message || "Done.", false);
      } else {
        toast(said.error || "That did not work.", true);
      }
    } catch (error) {
      toast("The server could not be reached: " + error.message, true);
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  });
})();

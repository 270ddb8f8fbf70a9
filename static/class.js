// A page in a live class (app.classroom). A student's page follows the teacher: on each "state"
// event it fetches the room's workspace, unless the student explores on their own. The teacher's
// page refreshes the class's predictions as they arrive. Events come from the server as
// server-sent events (EventSource reconnects by itself). No inline script: CSP-friendly.
(function () {
  "use strict";

  let following = true;
  let version = null; // the room's version this page shows

  const panel = () => document.getElementById("class-panel");
  const field = (name) => document.querySelector('#state input[name="' + name + '"]');

  function follow(on) {
    const p = panel();
    following = on;
    p.classList.toggle("exploring", !on);
    const f = field("class_follow");
    if (f) f.value = on ? "1" : "";
    if (on) fetchWorkspace();
  }

  function fetchWorkspace() {
    window.htmx.ajax("GET", panel().dataset.workspace, { target: "#workspace", swap: "outerHTML" });
  }

  function fetchResults() {
    const key = field("class_key");
    if (!key || !document.getElementById("class-results")) return;
    window.htmx.ajax("POST", panel().dataset.results,
      { target: "#class-results", swap: "outerHTML", values: { class_key: key.value } });
  }

  function connect(p) {
    const source = new EventSource(p.dataset.events);
    source.addEventListener("state", function (ev) {
      const v = parseInt(ev.data, 10);
      const changed = version !== null && v !== version;
      // The first event tells the version now: the page may have been rendered just before a change.
      if (p.dataset.role === "student" && following && (changed || (version === null && String(v) !== p.dataset.version))) {
        fetchWorkspace();
      }
      version = v;
    });
    source.addEventListener("predictions", function () {
      if (p.dataset.role === "teacher") fetchResults();
    });
    source.addEventListener("joined", function (ev) {
      const count = document.getElementById("class-count");
      const n = parseInt(ev.data.split(" ")[1], 10);
      if (count && n >= 0) count.textContent = n + (n === 1 ? " student joined" : " students joined");
    });
    source.addEventListener("closed", function () { source.close(); });
  }

  // A student who edits, steps or changes the view on their own page (a post to the page's own
  // routes) explores; inspecting a cell (posted by the page's script from the form itself) keeps
  // following, as do the class's own requests (the workspace, a prediction, their verdict).
  document.addEventListener("htmx:configRequest", function (ev) {
    const p = panel();
    const f = document.getElementById("state");
    if (!p || !f || p.dataset.role !== "student" || !following || ev.detail.verb !== "post") return;
    const path = ev.detail.path;
    if (path !== f.getAttribute("action") && path !== f.dataset.stagesUrl) return;
    if (ev.detail.elt === f && path === f.dataset.stagesUrl) return;
    follow(false);
    ev.detail.parameters.set("class_follow", "");
  });

  document.addEventListener("click", function (ev) {
    if (!ev.target.closest) return;
    if (ev.target.closest("#class-explore")) follow(false);
    else if (ev.target.closest("#class-back")) follow(true);
  });

  document.addEventListener("DOMContentLoaded", function () {
    const p = panel();
    if (!p || !window.EventSource || !window.htmx) return;
    connect(p);
  });
})();

// A page in a live class (app.web.classroom). A student's page follows the teacher: each "state"
// event carries the room's workspace, rendered and gzip-compressed once for the whole class
// (app.web.class_stream), which the page inflates and swaps in, unless the student explores on their
// own; when the class moved to another kind of page, the event carries that whole page ("page" before
// it), which replaces this one as a reload would. An event without either (or a browser without
// DecompressionStream) fetches the workspace. The
// teacher's page refreshes the class's predictions as they arrive. Events come from the server as
// server-sent events; the server keeps the latest event of each kind for a slow page, and a stream
// that reconnects starts with the room's version, so a page never stays on an old step. When the
// class cannot be reached (the server answers 5xx, or not at all) the page says so and tries again.
// No inline script: CSP-friendly.
(function () {
  "use strict";

  let following = true;
  let version = null; // the room's version this page shows
  let source = null;
  let retryMs = 2000; // after a refused stream: doubles up to 8 s while the class cannot be reached
  const RETRY_MAX_MS = 8000; // a restarted store is back within seconds: the page follows again soon after
  let kept = null; // a following student's stage and open drawers, taken before the workspace is fetched

  const panel = () => document.getElementById("class-panel");
  const field = (name) => document.querySelector('#state input[name="' + name + '"]');

  function alertText(text) {
    const a = document.getElementById("class-alert");
    if (!a) return;
    a.textContent = text || "";
    a.hidden = !text;
  }

  function unreachable() {
    const p = panel();
    alertText(p && p.dataset.role === "teacher"
      ? t("The class cannot be reached: your last change may not have reached the students. Trying again…")
      : t("The class cannot be reached. Trying again…"));
  }

  function follow(on) {
    const p = panel();
    following = on;
    p.classList.toggle("exploring", !on);
    const f = field("class_follow");
    if (f) f.value = on ? "1" : "";
    if (on) fetchWorkspace();
  }

  // What a change swaps in: a real model's page its results (#model-work, …: the panel's data-work), a toy
  // scenario's page its workspace.
  const workTarget = () => panel().dataset.work || "#workspace";

  function fetchWorkspace() {
    kept = { stage: stageId(), drawers: openDrawers(), guess: guessTyped() };
    window.htmx.ajax("GET", panel().dataset.workspace, { target: workTarget(), swap: "outerHTML" });
  }

  // --- the workspace an event carries ---------------------------------------------------------------
  let latest = 0; // the newest version an event brought: an older one still inflating is not swapped in

  async function inflate(packed) {
    const bytes = Uint8Array.from(atob(packed), function (c) { return c.charCodeAt(0); });
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  function swapCarried(v, packed) {
    latest = v;
    inflate(packed).then(function (html) {
      if (v !== latest || !following || replaced) return;
      const before = { stage: stageId(), drawers: openDrawers(), guess: guessTyped() };
      window.htmx.swap(workTarget(), html, { swapStyle: "outerHTML" }, {
        afterSwapCallback: function () {
          keepDrawers(before.drawers);
          keepGuess(before.guess);
        },
        afterSettleCallback: function () {
          if (stageId() && stageId() !== before.stage) showStage();
        },
      });
      // As the workspace's own answer does (HX-Replace-Url): a reload follows the teacher.
      const page = panel().dataset.page;
      if (page && window.location.pathname !== page) window.history.replaceState(null, "", page);
    }).catch(fetchWorkspace);
  }

  // --- the whole page an event carries ---------------------------------------------------------------
  // The class moved to another kind of page (a toy scenario, "Your sentence", "Next word"): the page the
  // event carries is written over this one, as a reload would load it (its scripts run, htmx starts on it,
  // its own script opens the stream for its kind), without the reload's requests. Writing a document
  // erases this one's listeners; this page's stream, its timers and its swaps still on their way stop here.
  let replaced = false;

  function replacePage(v, packed) {
    latest = v;
    inflate(packed).then(function (html) {
      if (v !== latest || !following || replaced) return;
      replaced = true;
      source.close();
      // The class's own address, as the page's answer would say: a reload follows the teacher.
      const page = panel().dataset.page;
      if (page && window.location.pathname !== page) window.history.replaceState(null, "", page);
      document.open();
      document.write(html);
      document.close();
      window.scrollTo(0, 0);
    }).catch(function () { if (!replaced) fetchWorkspace(); });
  }

  // --- a guess being typed on "Next word" -------------------------------------------------------
  // The teacher's change of head or temperature swaps the results, the guess box with them: what the student
  // typed, and the answer to what they sent, stay while the text they guess about stays.
  const guessAbout = () => document.querySelector('input[name="about"][form="guess-form"]');

  function guessTyped() {
    const input = document.getElementById("guess");
    const about = guessAbout();
    if (!input || !about) return null;
    const answer = document.getElementById("guess-feedback");
    return { about: about.value, value: input.value, focused: document.activeElement === input,
             start: input.selectionStart, end: input.selectionEnd, answer: answer ? answer.outerHTML : "" };
  }

  function keepGuess(typed) {
    const input = document.getElementById("guess");
    const about = guessAbout();
    if (!typed || !input || !about || about.value !== typed.about) return; // another text: another guess
    input.value = typed.value;
    if (typed.focused) {
      input.focus();
      input.setSelectionRange(typed.start, typed.end);
    }
    const answer = document.getElementById("guess-feedback");
    if (answer && typed.answer) answer.outerHTML = typed.answer;
  }

  // --- what a student's page keeps of its own while it follows ---------------------------------
  // The room carries no drawer: each student's Inputs (and learning target) stay as they left them.
  // At a new stage the page brings the stage's heading and first result into view, as the teacher's
  // Next does on the projector; it never takes the focus, nor moves the page under a field being typed in.
  const stage = () => document.querySelector("#stages article.stage");
  const stageId = () => (stage() ? stage().id : "");
  const openDrawers = () => Array.from(document.querySelectorAll("details[data-drawer]"))
    .filter(function (d) { return d.open; }).map(function (d) { return d.dataset.drawer; });

  function isWorkspace(ev) {
    const p = panel();
    const info = ev.detail.pathInfo;
    return Boolean(kept && p && info && info.requestPath === p.dataset.workspace);
  }

  function keepDrawers(drawers) {
    document.querySelectorAll("details[data-drawer]").forEach(function (d) {
      const open = drawers.indexOf(d.dataset.drawer) >= 0;
      if (d.open !== open) d.open = open;
      d.dataset.keep = open ? "open" : "closed";
    });
    const field = document.getElementById("open-panels");
    if (!field) return;
    const words = new Set(field.value.split(" ").filter(Boolean));
    document.querySelectorAll("details[data-drawer]").forEach(function (d) { words.delete(d.dataset.drawer); });
    drawers.forEach(function (w) { words.add(w); });
    field.value = Array.from(words).sort().join(" ");
  }

  function typing() {
    const a = document.activeElement;
    if (!a || a === document.body || !a.matches) return false;
    return a.matches("textarea, select, [contenteditable], input:not([type=checkbox]):not([type=radio])" +
                     ":not([type=range]):not([type=button]):not([type=submit]):not([type=reset])");
  }

  function inView(el) {
    if (!el) return true;
    const r = el.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= window.innerHeight;
  }

  function showStage() {
    const s = stage();
    if (!s || typing()) return;
    const heading = s.querySelector("h3");
    const result = s.querySelector(".stage-head ~ * table, .stage-head ~ * figure, .stage-head ~ table, .stage-head ~ figure");
    if (inView(heading) && inView(result)) return;
    window.scrollTo(0, Math.max(0, s.getBoundingClientRect().top + window.scrollY - 8));
  }

  document.addEventListener("htmx:afterSwap", function (ev) {
    if (!isWorkspace(ev)) return;
    keepDrawers(kept.drawers);
    keepGuess(kept.guess);
  });
  document.addEventListener("htmx:afterSettle", function (ev) {
    if (!isWorkspace(ev)) return;
    const before = kept.stage;
    kept = null;
    if (stageId() && stageId() !== before) showStage();
  });

  function fetchResults() {
    const results = document.getElementById("class-results");
    if (!results) return;
    // A menu the teacher has open in the results (Save figure, export) stays open when the new counts
    // replace them: a prediction arriving just then would otherwise close it under the pointer.
    const menus = function (root) { return Array.from(root.querySelectorAll("details")); };
    const open = menus(results).map(function (d) { return d.open; });
    // The teacher's key is in an HttpOnly cookie, sent with this request: never in the page.
    window.htmx.ajax("POST", panel().dataset.results, { target: "#class-results", swap: "outerHTML" })
      .then(function () {
        const now = document.getElementById("class-results");
        if (!now || now === results) return;
        const found = menus(now);
        if (found.length !== open.length) return;  // another panel: nothing to keep
        found.forEach(function (d, i) { if (open[i]) d.open = true; });
      });
  }

  const carries = typeof DecompressionStream === "function";

  function connect(p) {
    // A following student's stream carries the workspace: from the version this page shows, which the
    // server then need not send again.
    const url = p.dataset.role === "student" && carries
      ? p.dataset.events + "&v=" + encodeURIComponent(version === null ? p.dataset.version : version)
      : p.dataset.role === "student" ? p.dataset.events.split("?")[0] : p.dataset.events;
    source = new EventSource(url);
    source.addEventListener("state", function (ev) {
      const data = ev.data.split(" ");
      const v = parseInt(data[0], 10);
      const shown = version === null ? parseInt(p.dataset.version, 10) : version;
      retryMs = 2000;
      alertText("");
      // The first event tells the version now: the page may have been rendered just before a change.
      if (p.dataset.role === "student" && following && v !== shown) {
        if (data[1] === "page" && data[2] && carries) replacePage(v, data[2]);
        else if (data[1] && data[1] !== "page" && carries) swapCarried(v, data[1]);
        else fetchWorkspace();
      }
      version = v;
    });
    source.addEventListener("predictions", function () {
      if (p.dataset.role === "teacher") fetchResults();
    });
    source.addEventListener("joined", function (ev) {
      const count = document.getElementById("class-count");
      const n = parseInt(ev.data.split(" ")[1], 10);
      if (count && n >= 0) {
        count.textContent = n === 1 ? t("{n} student joined", { n: n }) : t("{n} students joined", { n: n });
      }
    });
    source.addEventListener("closed", function () { source.close(); alertText(t("This class has ended.")); });
    // The store went away (a restart of Redis): the stream stays open, and its next "state" says the class is back.
    source.addEventListener("unreachable", function () { unreachable(); });
    // A refused stream (503 while the store is down) is not retried by the browser: this page does.
    source.addEventListener("error", function () {
      if (replaced || source.readyState !== EventSource.CLOSED) return;
      unreachable();
      window.setTimeout(function () { connect(p); }, retryMs);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    });
  }

  // htmx does not swap a 5xx answer, nor one that never came: the class panel says what happened.
  document.addEventListener("htmx:responseError", function (ev) {
    if (!panel()) return;
    const status = ev.detail.xhr ? ev.detail.xhr.status : 0;
    if (status >= 500) unreachable();
    else if (status === 413) alertText(t("That change is too large for the class: it did not reach the students."));
  });
  document.addEventListener("htmx:sendError", function () { if (panel()) unreachable(); });
  document.addEventListener("htmx:afterRequest", function (ev) {
    if (panel() && ev.detail.successful && source && source.readyState === EventSource.OPEN) alertText("");
  });

  // A student who edits, steps or changes the view on their own page (a post to the page's own
  // routes) explores; inspecting a cell (posted by the page's script from the form itself) keeps
  // following, as do the class's own requests (the workspace, a prediction, their verdict).
  document.addEventListener("htmx:configRequest", function (ev) {
    const p = panel();
    const m = document.getElementById("model-form") || document.getElementById("decoder-form");
    // On a real model's page a student's own text, head or view is a GET of the form's address.
    if (p && m && p.dataset.role === "student" && following && ev.detail.verb === "get" &&
        ev.detail.path.split("?")[0] === m.getAttribute("action")) {
      follow(false);
      return;
    }
    const f = document.getElementById("state");
    if (!p || !f || p.dataset.role !== "student" || !following || ev.detail.verb !== "post") return;
    const path = ev.detail.path;
    const action = (f.getAttribute("action") || "").split("#")[0]; // the form's address lands at #stages
    if (path !== action && path !== f.dataset.stagesUrl) return;
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
    following = !p.classList.contains("exploring"); // a page of the student's own sentence explores
    connect(p);
  });
})();

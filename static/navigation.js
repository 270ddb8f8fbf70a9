// Where the student is on the page: the stage comes into view when they change stage, the focus stays on
// the control they used across every swap, and a skip link leads past the header to the stage.
// No inline handlers: CSP-friendly.
(function () {
  "use strict";

  const MARGIN = 8; // px between the top of the screen and the stage's heading
  const REVEAL_KEY = "attention-reveal-stage"; // a new scenario loads a whole page: the stage is revealed on load
  const calm = () => window.matchMedia("(prefers-reduced-motion: reduce)").matches;

  function currentStage() {
    return document.querySelector("#stages article.stage");
  }

  // What a sticky bar (presenter mode's stepper) covers at the top of the screen.
  function coveredTop() {
    const stepper = document.querySelector("#stages .stepper");
    if (!stepper || getComputedStyle(stepper).position !== "sticky") return 0;
    return stepper.getBoundingClientRect().height;
  }

  // What a bar fixed at the bottom (a phone's stepper) covers at the bottom of the screen.
  function coveredBottom() {
    const stepper = document.querySelector("#stages .stepper");
    if (!stepper || getComputedStyle(stepper).position !== "fixed") return 0;
    return stepper.getBoundingClientRect().height;
  }

  // The stage's heading and its result (its first matrix that is not an operand) on screen: when one of them
  // is not, scroll by the least that shows the whole result, never past the heading. `top` puts the heading at
  // the top of the screen instead (the skip link, and every step on a phone, whose stepper is fixed at the bottom:
  // each stage lands at the same place). Scrolling never moves the focus.
  function revealStage(top) {
    const stage = currentStage();
    const heading = stage && stage.querySelector(".stage-head h3");
    if (!heading) return;
    const result = stage.querySelector("figure.panel:not(.operand) table") || heading;
    const margin = MARGIN + coveredTop();
    const h = heading.getBoundingClientRect();
    const r = result.getBoundingClientRect();
    const below = coveredBottom();
    const height = window.innerHeight - below;
    let delta = 0;
    if (top || below || h.top < margin) delta = h.top - margin;
    else if (h.bottom > height || r.bottom > height) delta = Math.min(h.top - margin, r.bottom + MARGIN - height);
    if (Math.abs(delta) < 1) return;
    window.scrollBy({ top: delta, behavior: calm() ? "auto" : "smooth" });
  }

  // The controls that change the stage in view: the stepper (and the arrow keys, which press it), the map's
  // links, the backward pass's gradient chips, and the go-to buttons of a page without links.
  const STAGE_CHANGE = "#prev-stage, #next-stage, .pipeline-map a, .backward-map a, .map-steps button";
  let revealAfterSwap = false;
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const elt = ev.detail.elt;
    if (elt && elt.matches && elt.matches(STAGE_CHANGE)) revealAfterSwap = true;
  });

  // A new scenario is a whole page (a GET, or the teacher's post): note it, and reveal its stage once loaded.
  document.addEventListener("change", function (ev) {
    if (ev.target.id !== "preset-choice") return;
    try { sessionStorage.setItem(REVEAL_KEY, "1"); } catch (e) { /* storage off: the page loads at its top */ }
  }, true);

  // Focus stays where the student left it. htmx gives it back to an element with an id; any other control
  // the swap replaced (a gradient chip, a step button of the Learn panel, an input without an id) is found
  // again by its name (and a button by its value too), or a map link by its stage.
  function focusSelector(el) {
    if (!el || el === document.body || !el.closest || !el.closest("#state")) return null;
    const name = el.getAttribute("name");
    if (name) {
      const value = el.tagName === "BUTTON" ? el.getAttribute("value") : null;
      return '[name="' + CSS.escape(name) + '"]' + (value !== null ? '[value="' + CSS.escape(value) + '"]' : "");
    }
    const link = el.closest("a[data-stage]");
    if (link) {
      const nav = link.closest(".backward-map") ? ".backward-map" : ".pipeline-map";
      return nav + ' a[data-stage="' + CSS.escape(link.getAttribute("data-stage")) + '"]';
    }
    return null;
  }

  let lostFocus = null;
  document.addEventListener("htmx:beforeSwap", function () { lostFocus = focusSelector(document.activeElement); });

  function keepFocus() {
    const selector = lostFocus;
    lostFocus = null;
    const active = document.activeElement;
    if (!selector || (active && active !== document.body)) return;
    const all = Array.from(document.querySelectorAll(selector));
    const found = all.find(function (el) { return el.offsetParent !== null; }) || all[0]; // the visible one first
    if (found) found.focus({ preventScroll: true });
  }

  document.addEventListener("htmx:afterSettle", function () {
    keepFocus();
    if (revealAfterSwap) { // measured once the other settle handlers have added what they add
      revealAfterSwap = false;
      requestAnimationFrame(function () { revealStage(false); });
    }
  });

  // The skip link: the focus on the stage in view (its matrices are the next stops), its heading at the top.
  document.addEventListener("click", function (ev) {
    const link = ev.target.closest && ev.target.closest("a.skip-link");
    const stage = link && currentStage();
    if (!stage) return;
    ev.preventDefault();
    stage.tabIndex = -1;
    stage.focus({ preventScroll: true });
    revealStage(true);
  });

  // Measured once the page is laid out in its fonts (the maths font changes the heights).
  window.addEventListener("load", function () {
    let reveal = false;
    try {
      reveal = sessionStorage.getItem(REVEAL_KEY) === "1";
      sessionStorage.removeItem(REVEAL_KEY);
    } catch (e) { /* storage off */ }
    if (reveal) document.fonts.ready.then(function () { requestAnimationFrame(function () { revealStage(false); }); });
  });
})();

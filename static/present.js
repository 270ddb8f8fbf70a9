// Presenter mode: Escape leaves it (the Exit button does the same without JavaScript), and each stage is sized
// to the screen (static/present.css's --fit). No inline handlers.
(function () {
  "use strict";

  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Escape" || ev.altKey || ev.ctrlKey || ev.metaKey || ev.defaultPrevented) return;
    const t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    const exit = document.querySelector("#workspace.present #present-toggle");
    if (exit) {
      ev.preventDefault();
      exit.click();
    }
  });

  // --- One stage, one screen ---------------------------------------------------------------------------------
  // --fit is the size of an operand's numbers. The largest size at which the stage's panels end above the bottom
  // of the screen and inside its width wins, up to LARGEST. Numbers are shown at READABLE px or more on a
  // 1920×1080 screen, proportionally less on a smaller one (the same size on the wall); below that the stage
  // shows its heatmaps' colours alone (.cells-only) and says so, with a button that shows the numbers anyway.
  const READABLE = 18;
  const SMALLEST = 4; // colours alone: a cell of a few pixels still shows its colour
  const SHRUNK = ":scope > .row, :scope > .qkv-eqs, :scope > .weights-view"; // what shrinkToFit scales
  const FULL_HD = { width: 1920, height: 1080 };
  const PANELS = "figure.panel, figure.lines, .row";

  function screenScale() {
    return Math.min(1, window.innerWidth / FULL_HD.width, window.innerHeight / FULL_HD.height);
  }

  function fits(stage) {
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > width) return false;
    let bottom = 0;
    for (const el of stage.querySelectorAll(PANELS)) {
      const box = el.getBoundingClientRect();
      if (box.right > width + 0.5 || box.left < -0.5) return false;
      bottom = Math.max(bottom, box.bottom + window.scrollY);
    }
    for (const box of stage.querySelectorAll(".scroll")) {
      if (box.closest("details:not([open])")) continue; // a folded weight: not on the screen
      if (box.scrollWidth - box.clientWidth > 1) return false;
    }
    return bottom <= window.innerHeight - 2;
  }

  // The largest size in [low, high] that fits (to a quarter pixel), or null when even `low` does not.
  function largestFitting(stage, low, high) {
    const attempt = (px) => { stage.style.setProperty("--fit", px + "px"); return fits(stage); };
    if (!attempt(low)) return null;
    if (attempt(high)) return high;
    let lo = low, hi = high;
    while (hi - lo > 0.25) {
      const mid = (lo + hi) / 2;
      if (attempt(mid)) lo = mid; else hi = mid;
    }
    attempt(lo);
    return lo;
  }

  // A stage too large even at SMALLEST (a 64-dimension head on a laptop): its equations are zoomed out as a
  // whole, fixed-size parts too, until its panels end above the bottom of the screen.
  function shrinkToFit(stage) {
    stage.style.setProperty("--fit", SMALLEST + "px");
    const parts = stage.querySelectorAll(SHRUNK);
    let zoom = 1;
    for (let i = 0; i < 6 && !fits(stage) && parts.length; i++) {
      const top = parts[0].getBoundingClientRect().top;
      let bottom = top;
      parts.forEach((p) => { bottom = Math.max(bottom, p.getBoundingClientRect().bottom); });
      const room = window.innerHeight - 2 - top;
      zoom *= Math.max(0.1, Math.min(0.95, room / Math.max(1, bottom - top)));
      parts.forEach((p) => { p.style.zoom = String(zoom); });
    }
  }

  function fitNote(stage) {
    let note = stage.querySelector(":scope > .fit-note");
    if (!note) {
      note = document.createElement("p");
      note.className = "fit-note";
      note.textContent = t("Colours only, to fit the screen: select a cell to see its number and arithmetic.");
      const show = document.createElement("button");
      show.type = "button";
      show.textContent = t("Show the numbers");
      show.addEventListener("click", function () {
        stage.dataset.numbers = "on"; // kept until the stage is swapped
        fitStage(stage);
      });
      note.append(show);
      const head = stage.querySelector(":scope > .stage-head");
      if (head) head.after(note); else stage.prepend(note);
    }
    return note;
  }

  function fitStage(stage) {
    stage.querySelectorAll("svg.lines-svg").forEach(function (svg) {
      svg.style.setProperty("--vb-h", String(svg.viewBox.baseVal.height / 14)); // in labels' heights
    });
    const scale = screenScale();
    const readable = READABLE * scale;
    const largest = Math.max(readable, 2.2 * READABLE * scale);
    stage.classList.remove("cells-only");
    stage.querySelectorAll(SHRUNK).forEach((p) => { p.style.zoom = ""; });
    const note = stage.querySelector(":scope > .fit-note");
    if (note) note.hidden = true;
    if (stage.dataset.numbers === "on") {
      stage.style.setProperty("--fit", readable + "px"); // the numbers asked for: readable, the page scrolls
    } else if (largestFitting(stage, readable, largest) === null) {
      stage.classList.add("cells-only");
      fitNote(stage).hidden = false;
      if (largestFitting(stage, SMALLEST, readable) === null) shrinkToFit(stage);
    }
    stage.dataset.fitted = window.innerWidth + "x" + window.innerHeight;
  }

  function fitAll() {
    document.querySelectorAll("#workspace.present article.stage").forEach(fitStage);
  }

  let pending = 0;
  function fitSoon() {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(fitAll);
  }

  document.addEventListener("DOMContentLoaded", fitAll);
  window.addEventListener("load", fitAll); // after the fonts: a stage fitted before them may have grown
  document.addEventListener("htmx:afterSettle", fitAll);
  window.addEventListener("resize", fitSoon);
  // A folded weight opened (or closed again) changes what the stage must fit.
  document.addEventListener("toggle", function (ev) {
    if (ev.target.matches && ev.target.matches("#workspace.present details.fold")) fitSoon();
  }, true);
})();

// Attention, step by step — the page's main script; navigation.js, edit.js, export.js, present.js and class.js
// add their parts. No inline handlers: CSP-friendly.
// Keyboard stepping, keyboard and mouse cell inspection, and marking the field an error names.
(function () {
  "use strict";

  const form = () => document.getElementById("state");
  const isTyping = (el) => el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA");

  // ←/→ step through the stages (unless the student is typing or moving inside a matrix).
  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey || isTyping(ev.target)) return;
    if (ev.target.closest && ev.target.closest("table[data-inspect], table[data-edit]")) return;
    const id = ev.key === "ArrowLeft" ? "prev-stage" : ev.key === "ArrowRight" ? "next-stage" : null;
    const button = id && document.getElementById(id);
    if (button && !button.disabled) {
      ev.preventDefault();
      button.click();
    }
  });

  // Choosing a scenario loads it at once (without JavaScript, the Load button beside it does).
  document.addEventListener("change", function (ev) {
    if (ev.target.id !== "preset-choice" || !ev.target.form) return;
    ev.target.form.requestSubmit();
  });

  // Enter in a value cell would submit the whole form; the edit is already on its way.
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter" || !ev.target.matches) return;
    if (ev.target.matches(".values input")) ev.preventDefault();
    if (ev.target.matches("section.quiz input")) { // Enter checks the prediction
      ev.preventDefault();
      const check = document.getElementById("check-guess");
      if (check) check.click();
    }
  });

  // Inspectable heatmaps: one cell in the tab order per table (roving tabindex), arrows move.
  let refocus = null;

  function cellRef(td) {
    const table = td.closest("table[data-inspect]");
    const row = td.parentElement.rowIndex - 1; // minus the header row
    const col = td.cellIndex - 1; // minus the row header
    return table.dataset.ref + "." + row + "." + col;
  }

  function prepareTables(root) {
    root.querySelectorAll("table[data-inspect]").forEach(function (table) {
      const cells = table.querySelectorAll("tbody td");
      if (!cells.length) return;
      const start = table.querySelector("td.sel") || cells[0];
      cells.forEach(function (td) { td.tabIndex = td === start ? 0 : -1; });
      table.setAttribute("aria-describedby", "inspector-h");
    });
    if (refocus) {
      const [ref, row, col] = refocus;
      refocus = null;
      const table = document.querySelector('table[data-ref="' + CSS.escape(ref) + '"]');
      const tr = table && table.tBodies[0].rows[row];
      const td = tr && tr.cells[col + 1];
      if (td) { moveFocus(td, true); }
      revealInspector(table);
    }
    markFields();
  }

  // The arithmetic just asked for: the inspector comes into view (on a laptop it opens below the fold), scrolled by
  // the least that shows it whole, but never so far that the selected cell's matrix leaves the top of the screen;
  // at least the inspector's first lines (its heading and the cell's result) come up in any case.
  const INSPECTOR_LINES = 140; // px
  function revealInspector(table) {
    const inspector = document.getElementById("inspector");
    if (!inspector) return;
    const margin = 8;
    const box = inspector.getBoundingClientRect();
    let delta = box.bottom + margin - window.innerHeight;
    if (delta <= 0) return;
    const figure = table && table.closest("figure");
    if (figure) delta = Math.min(delta, figure.getBoundingClientRect().top - margin);
    delta = Math.max(delta, Math.min(box.top, box.top + INSPECTOR_LINES - window.innerHeight));
    if (delta > 0) window.scrollBy({ top: delta, behavior: "auto" });
  }

  function moveFocus(td, preventScroll) {
    const table = td.closest("table");
    table.querySelectorAll("td[tabindex='0']").forEach(function (c) { c.tabIndex = -1; });
    td.tabIndex = 0;
    td.focus({ preventScroll: Boolean(preventScroll) });
  }

  // In a quiz a hidden cell is not inspected (that would show its value): it becomes the cell to
  // predict, and the prediction box takes the focus.
  function chooseForQuiz(td) {
    const table = td.closest("table[data-inspect]");
    const box = td.closest("article.stage") && td.closest("article.stage").querySelector("section.quiz");
    if (!box) return;
    const set = function (name, value) {
      const el = box.querySelector('[name="' + name + '"]');
      if (el) el.value = value;
    };
    set("guess_matrix", table.dataset.ref.split(".")[0]);
    // The boxes count from 1, as the page does: the header row and the row header make up the 1.
    set("guess_row", td.parentElement.rowIndex);
    set("guess_col", td.cellIndex);
    const guess = box.querySelector('[name="guess"]');
    if (guess) guess.focus();
  }

  function inspect(td) {
    if (td.classList.contains("qz")) { chooseForQuiz(td); return; }
    const f = form();
    const field = document.getElementById("inspect-ref");
    if (!f || !field || !window.htmx) return;
    const ref = cellRef(td);
    field.value = ref;
    const table = td.closest("table[data-inspect]");
    refocus = [table.dataset.ref, td.parentElement.rowIndex - 1, td.cellIndex - 1];
    window.htmx.ajax("POST", f.dataset.stagesUrl, { source: f, target: "#stages", swap: "outerHTML" });
  }

  document.addEventListener("click", function (ev) {
    const td = ev.target.closest && ev.target.closest("table[data-inspect] td");
    if (td) inspect(td);
  });

  document.addEventListener("keydown", function (ev) {
    const td = ev.target.closest && ev.target.closest("table[data-inspect] td");
    if (!td) return;
    const tr = td.parentElement;
    const rows = tr.parentElement.rows;
    let target = null;
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); inspect(td); return; }
    if (ev.key === "ArrowRight") target = tr.cells[td.cellIndex + 1];
    if (ev.key === "ArrowLeft" && td.cellIndex > 1) target = tr.cells[td.cellIndex - 1];
    if (ev.key === "ArrowDown" && tr.sectionRowIndex + 1 < rows.length) target = rows[tr.sectionRowIndex + 1].cells[td.cellIndex];
    if (ev.key === "ArrowUp" && tr.sectionRowIndex > 0) target = rows[tr.sectionRowIndex - 1].cells[td.cellIndex];
    if (target) { ev.preventDefault(); moveFocus(target); }
  });

  // Error slots name their fields: mark those inputs, clear every other mark.
  function markFields() {
    const f = form();
    if (!f) return;
    const named = new Set();
    document.querySelectorAll(".field-error[data-field]").forEach(function (slot) {
      if (slot.textContent.trim()) named.add(slot.dataset.field);
    });
    f.querySelectorAll("[aria-invalid='true']").forEach(function (el) {
      if (!named.has(el.name)) { el.removeAttribute("aria-invalid"); el.classList.remove("invalid"); }
    });
    named.forEach(function (name) {
      const input = f.querySelector('[name="' + CSS.escape(name) + '"]');
      if (input) { input.setAttribute("aria-invalid", "true"); input.classList.add("invalid"); }
    });
  }

  // Extra panels (scaling lab, cost) are computed only while open: opening one asks the server
  // for it, closing one drops it from the hidden list so later updates leave it closed.
  document.addEventListener("toggle", function (ev) {
    const details = ev.target;
    // The inputs drawer: remembered in the form's panels, so the next swap keeps it as it is.
    if (details.dataset && details.dataset.drawer) {
      const panels = document.getElementById("open-panels");
      if (!panels) return;
      const words = new Set(panels.value.split(" ").filter(Boolean));
      if (details.open) words.add(details.dataset.drawer); else words.delete(details.dataset.drawer);
      panels.value = Array.from(words).sort().join(" ");
      return;
    }
    if (!details.matches || !details.matches("details[data-panel], details.panel-extra")) return;
    const field = document.getElementById("open-panels");
    const key = details.id.replace(/-panel$/, "");
    if (!field) return;
    const open = new Set(field.value.split(" ").filter(Boolean));
    if (details.open) {
      const show = details.querySelector('button[name="show_panel"]');
      if (show) show.click();
    } else if (open.delete(key)) {
      field.value = Array.from(open).join(" ");
    }
  }, true);

  // Attention lines: the head checkboxes work in CSS alone; remembering the unticked ones here keeps
  // them unticked across the swap that follows every edit.
  const untickedHeads = {}; // figure id → Set of head indices
  document.addEventListener("change", function (ev) {
    const box = ev.target.closest && ev.target.closest(".head-toggle input");
    const figure = box && box.closest("figure.lines");
    if (!figure) return;
    const unticked = untickedHeads[figure.id] || (untickedHeads[figure.id] = new Set());
    if (box.checked) unticked.delete(box.dataset.h); else unticked.add(box.dataset.h);
  });

  function restoreHeads() {
    Object.keys(untickedHeads).forEach(function (id) {
      const figure = document.getElementById(id);
      if (!figure) return;
      figure.querySelectorAll(".head-toggle input").forEach(function (box) {
        box.checked = !untickedHeads[id].has(box.dataset.h);
      });
    });
  }

  // Each grid of number inputs (table[data-grid]) goes to the server as one field, grid-<key>: its
  // rows joined by ";", each row's cells by " " (app.state.form reads it as it reads the cells one by one).
  // A d_model 64 page then posts a few dozen fields instead of 20,000. A grid with a space or a ";" typed
  // in a cell, or whose cells do not fill a rectangle, is sent as is.
  const CELL = /^(.+)-(\d+)-(\d+)$/;

  function isWhole(rows) { // every row there, as long as the first, every cell there and joinable
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      if (!row || row.length !== rows[0].length) return false;
      for (let j = 0; j < row.length; j++) {
        const v = row[j];
        if (v === undefined || v.indexOf(" ") >= 0 || v.indexOf(";") >= 0) return false;
      }
    }
    return true;
  }

  function joinGrids(params) {
    const keys = new Set();
    document.querySelectorAll("table[data-grid]").forEach(function (t) { keys.add(t.dataset.grid); });
    const grids = new Map(); // key → rows of cell texts
    const rest = [];
    for (const [name, value] of params.entries()) {
      const m = typeof value === "string" && CELL.exec(name);
      if (!m || !keys.has(m[1])) { rest.push([name, value]); continue; }
      if (!grids.has(m[1])) grids.set(m[1], []);
      const rows = grids.get(m[1]);
      const i = Number(m[2]);
      (rows[i] || (rows[i] = []))[Number(m[3])] = value;
    }
    if (!grids.size) return null;
    const out = new FormData();
    rest.forEach(function (pair) { out.append(pair[0], pair[1]); });
    grids.forEach(function (rows, key) {
      if (isWhole(rows)) {
        out.append("grid-" + key, rows.map(function (row) { return row.join(" "); }).join(";"));
        return;
      }
      for (let i = 0; i < rows.length; i++) {
        for (let j = 0; rows[i] && j < rows[i].length; j++) {
          if (rows[i][j] !== undefined) out.append(key + "-" + i + "-" + j, rows[i][j]);
        }
      }
    });
    return out;
  }

  // A value edit: since the editor's last request, only number inputs of its grids changed (not a token,
  // not a padding box). Such an edit changes numbers only, so the server answers with the stage body alone
  // (Attention-Edit: value) and leaves the map, the stepper and the view options on the page.
  let onlyNumbers = true;
  const isNumberCell = (el) => el.matches && el.matches("table[data-grid] input.num");
  document.addEventListener("input", function (ev) {
    if (ev.target.closest && ev.target.closest(".values") && !isNumberCell(ev.target)) onlyNumbers = false;
  });

  // htmx 2 hands the request's fields over in detail.parameters (a FormData, or a proxy of one) and
  // sends whatever FormData is there once the listeners are done.
  document.addEventListener("htmx:configRequest", function (ev) {
    const joined = joinGrids(ev.detail.parameters);
    if (joined) ev.detail.parameters = joined;
    if (ev.detail.elt && ev.detail.elt.matches && ev.detail.elt.matches(".values")) {
      if (onlyNumbers) ev.detail.headers["Attention-Edit"] = "value";
      onlyNumbers = true;
    }
  });

  // After a value edit the map stays, but its links (each stage's permalink, for a new tab or without
  // JavaScript) held the old values: each becomes the new permalink at its own stage, as the server
  // writes them (app.state.permalink.stage_permalinks, landing at #stages), or the step buttons when one is too long
  // for a link.
  function refreshMapLinks() {
    const map = document.querySelector(".pipeline-map[data-max-url]");
    if (!map) return;
    const permalink = document.getElementById("permalink");
    const base = permalink ? permalink.getAttribute("href") : null;
    const links = map.querySelectorAll("a[data-stage]");
    const hrefs = Array.from(links, function (a) {
      return base && base.replace(/([?&]stage=)[^&]*/, "$1" + encodeURIComponent(a.getAttribute("data-stage"))) + "#stages";
    });
    const fit = hrefs.every(function (h) { return h && h.length <= Number(map.dataset.maxUrl); });
    links.forEach(function (a, i) { a.setAttribute("href", fit ? hrefs[i] : "#map-steps"); });
  }

  document.addEventListener("htmx:afterSwap", function (ev) {
    if (ev.detail.target && ev.detail.target.id === "stage-body") refreshMapLinks();
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    // A whole page brings the inputs drawer open (for pages without JavaScript); close it unless kept open.
    const drawer = document.querySelector("details[data-drawer][data-keep='closed']");
    if (drawer) drawer.open = false;
    prepareTables(document);
  });
  // The scenario's paragraph, opened with "more": kept open across the swaps that send it again (out of band).
  let summaryOpen = false;
  document.addEventListener("toggle", function (ev) {
    if (ev.target.id === "summary") summaryOpen = ev.target.open;
  }, true);
  function restoreSummary() {
    const summary = document.getElementById("summary");
    if (summaryOpen && summary && summary.tagName === "DETAILS" && !summary.open) summary.open = true;
  }
  document.addEventListener("htmx:afterSettle", function () { prepareTables(document); restoreHeads(); restoreSummary(); fitFormulas(); });
  document.addEventListener("htmx:oobAfterSwap", markFields);

  // A stage's formula wider than its stage (the mask's cases, the heads' concatenation, on a phone) is set
  // smaller, down to seven tenths of its size, rather than scrolled sideways. Presenter mode fits its own.
  const SMALLEST_FORMULA = 0.7;
  function fitFormulas() {
    const formulas = Array.from(document.querySelectorAll("#stages .formula"))
      .filter(function (f) { return !f.closest(".present"); });
    formulas.forEach(function (f) { f.style.fontSize = ""; });
    // Read after every write: one layout for the formulas that fit, however many there are.
    formulas.filter(function (f) { return f.scrollWidth > f.clientWidth + 1; }).forEach(function (f) {
      const size = parseFloat(getComputedStyle(f).fontSize);
      let now = size;
      while (f.scrollWidth > f.clientWidth + 1 && now > SMALLEST_FORMULA * size) {
        // In proportion, at least 5 % a step: not every part of a formula scales with its font.
        now = Math.max(SMALLEST_FORMULA * size, Math.min(0.95 * now, now * f.clientWidth / f.scrollWidth));
        f.style.fontSize = now + "px";
      }
    });
  }
  document.addEventListener("DOMContentLoaded", fitFormulas);
  document.fonts.addEventListener("loadingdone", fitFormulas); // the maths font changes every formula's width
  window.addEventListener("resize", fitFormulas);

  // The newest request for the view wins. Each control sends the whole form, so the last one asked for
  // carries every change: an older answer still on its way (an edit, then a step before the edit's answer
  // came back) is not swapped in over it when the newer one redraws as much (the workspace holds the
  // stages). Requests from one control htmx already queues.
  const WIDER = { stages: ["stages", "workspace"], workspace: ["workspace"] };
  const asked = { stages: 0, workspace: 0 };
  let requests = 0;
  function dropOlder(ev) {
    const view = ev.detail.xhr && ev.detail.xhr.view;
    if (view && WIDER[view.name].some(function (wider) { return asked[wider] > view.number; })) {
      ev.detail.shouldSwap = false;
    }
  }
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const target = ev.detail.target;
    const view = target && target.id;
    if (view !== "stages" && view !== "workspace") return;
    asked[view] = ++requests;
    ev.detail.xhr.view = { name: view, number: requests };
    // htmx asks the element the request targeted, which a newer answer may have taken off the page by then
    // (so the question never reaches the document), though the answer goes where the server sends it.
    target.addEventListener("htmx:beforeSwap", dropOlder);
  });

  // A response htmx does not swap (5xx: the server busy, or a store that does not answer) leaves the
  // last good page as it was; say so beside the stage, in the server's words when it sent them.
  document.addEventListener("htmx:responseError", function (ev) {
    const xhr = ev.detail.xhr;
    const slot = document.getElementById("err-view");
    if (!slot || !xhr) return;
    let text = "";
    if ((xhr.getResponseHeader("Content-Type") || "").startsWith("text/html")) {
      const sent = new DOMParser().parseFromString(xhr.responseText, "text/html").querySelector("[data-field]");
      text = sent ? sent.textContent.trim() : "";
    }
    slot.textContent = text ||
      t("The server could not answer ({status}): the page is as it was. Try again in a moment.", { status: xhr.status });
  });
})();

// Editing a number where it is shown: the heatmaps of the inputs (the embeddings X, the source sentence C, a
// learned position table, the weights of the head in view) edit the Inputs drawer's own number inputs, so an
// edit posts what the drawer would post and gets the same light answer (the stage body alone).
// Keyboard first: the arrows move between cells, Enter (or F2, or a double click) turns a cell into an
// input, Enter or leaving it commits, Escape cancels. No inline handlers: CSP-friendly.
(function () {
  "use strict";

  // Heatmap (data-ref, before its ".head") → the drawer's grid (data-grid) when the names differ.
  const GRID_OF = { x_input: "x", context: "c", pe: "pos" };
  let refocus = null; // [data-ref, row, column] of the focused cell, for after a swap

  const inputOf = (key, i, j) => document.querySelector(
    '#editor table[data-grid="' + CSS.escape(key) + '"] input[name="' + CSS.escape(key + "-" + i + "-" + j) + '"]');

  // The drawer's grid a heatmap shows, or null: the same matrix, not a sum or another block's or head's copy.
  function gridOf(table) {
    if (table.dataset.quiz || !table.closest("article.stage")) return null;
    const parts = table.dataset.ref.split(".");
    const name = parts[0];
    const key = GRID_OF[name] || name;
    const block = document.querySelector('#stages select[name="block"]');
    if (block && block.value !== "0") return null; // the drawer holds the first block's weights
    if (name === "x") { // X = embeddings + positions is a sum: its embeddings are edited instead
      const pe = document.querySelector('#editor select[name="positional_encoding"]');
      if (pe && (pe.value === "sinusoidal" || pe.value === "learned")) return null;
    }
    if (parts.length > 1) { // a head's matrix: the drawer holds the weights of the head in view
      const head = document.querySelector('#state [name="head"]');
      if (!head || head.value !== parts[1]) return null;
    }
    const grid = document.querySelector('#editor table[data-grid="' + CSS.escape(key) + '"]');
    const rows = table.tBodies[0] ? table.tBodies[0].rows : [];
    if (!grid || !rows.length) return null;
    const names = new Set(Array.from(grid.querySelectorAll("input[name]"), function (el) { return el.name; }));
    for (let i = 0; i < rows.length; i++) { // every cell has its input: the same matrix, the same way round
      for (let j = 0; j < rows[i].cells.length - 1; j++) if (!names.has(key + "-" + i + "-" + j)) return null;
    }
    return key;
  }

  function prepare() {
    document.querySelectorAll("#stages table.heatmap[data-ref]").forEach(function (table) {
      const key = gridOf(table);
      if (!key) return;
      table.dataset.edit = key;
      // How to edit, said once per stage: under its first editable heatmap.
      const stage = table.closest("article.stage");
      const hintId = "edit-hint-" + stage.id;
      const figure = table.closest("figure");
      if (figure && !document.getElementById(hintId)) {
        const hint = document.createElement("p");
        hint.className = "edit-hint";
        hint.id = hintId;
        hint.textContent = t("Double-click a number, or press Enter on it, to edit it.");
        // Q, K and V side by side: under the three equations, so that no column is taller than the others.
        const columns = figure.closest(".qkv-eqs");
        if (columns) columns.after(hint);
        else figure.querySelector(".scroll").after(hint);
      }
      table.setAttribute("aria-describedby", hintId);
      if (!table.querySelector("td[tabindex='0']")) {
        table.querySelectorAll("tbody td").forEach(function (td, n) { td.tabIndex = n === 0 ? 0 : -1; });
      }
    });
    if (refocus) {
      const [ref, row, col] = refocus;
      refocus = null;
      const table = document.querySelector('table[data-edit][data-ref="' + CSS.escape(ref) + '"]');
      const td = table && table.tBodies[0].rows[row] && table.tBodies[0].rows[row].cells[col + 1];
      if (td) focusCell(td);
    }
  }

  function focusCell(td) {
    td.closest("table").querySelectorAll("td[tabindex='0']").forEach(function (c) { c.tabIndex = -1; });
    td.tabIndex = 0;
    td.focus({ preventScroll: true });
    td.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  const where = (td) => [td.parentElement.sectionRowIndex, td.cellIndex - 1];

  function startEdit(td) {
    const table = td.closest("table[data-edit]");
    const [i, j] = where(td);
    const source = inputOf(table.dataset.edit, i, j);
    if (!source || td.querySelector("input")) return;
    const box = document.createElement("input");
    box.type = "text"; // as the drawer's own inputs: it shows a true minus sign and takes "-" or "−"
    box.className = "cell-edit num";
    box.autocomplete = "off";
    box.spellcheck = false;
    box.value = source.value;
    box.setAttribute("aria-label", source.getAttribute("aria-label") || t("value"));
    td.dataset.shown = td.textContent;
    td.textContent = "";
    td.classList.add("editing");
    td.appendChild(box);
    box.focus();
    box.select();
  }

  // A typed number: "−" (the page's minus sign) read as "-"; anything else that is not a number is NaN.
  // A decimal comma (0,5, as French, German and Spanish classes write it) reads as a point, as the server reads it.
  const asNumber = (text) => {
    const s = String(text).replace(/\u2212/g, "-");
    return /^\s*$/.test(s) ? NaN : Number(/^[^,.]*,[^,.]*$/.test(s) ? s.replace(",", ".") : s);
  };

  // Commit (or cancel) the cell's edit; false when the text is not a number and the box stays open (the
  // server checks the range and names the cell when it is out of it).
  function finishEdit(box, commit) {
    if (box.dataset.done) return true;
    const td = box.parentElement;
    const table = td.closest("table[data-edit]");
    const [i, j] = where(td);
    const source = inputOf(table.dataset.edit, i, j);
    const value = box.value.trim();
    if (commit && value !== "" && !Number.isFinite(asNumber(value))) {
      box.setCustomValidity(t("Enter a number, such as 0.5 or −1.25"));
      box.reportValidity();
      box.addEventListener("input", function () { box.setCustomValidity(""); }, { once: true });
      return false;
    }
    const changed = commit && source && value !== "" && asNumber(value) !== asNumber(source.value);
    box.dataset.done = "1";
    td.classList.remove("editing");
    td.textContent = changed ? value.replace(/-/g, "\u2212") : td.dataset.shown;
    if (changed) {
      source.value = value;
      // As if typed in the drawer: its grid posts the edit (app.js marks it a value edit).
      source.dispatchEvent(new Event("input", { bubbles: true }));
    }
    return true;
  }

  document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (t.matches && t.matches("input.cell-edit")) {
      if (ev.key === "Enter" || ev.key === "Escape") {
        ev.preventDefault(); // Enter would submit the whole form; Escape would leave presenter mode
        ev.stopPropagation();
        const td = t.parentElement;
        if (finishEdit(t, ev.key === "Enter")) focusCell(td);
      }
      return;
    }
    const td = t.closest && t.closest("table[data-edit] td");
    if (!td || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === "Enter" || ev.key === "F2") {
      ev.preventDefault();
      ev.stopImmediatePropagation(); // an editable table's Enter edits, rather than inspects
      startEdit(td);
      return;
    }
    if (td.closest("table[data-inspect]")) return; // app.js moves between an inspectable table's cells
    const tr = td.parentElement;
    const rows = tr.parentElement.rows;
    let target = null;
    if (ev.key === "ArrowRight") target = tr.cells[td.cellIndex + 1];
    if (ev.key === "ArrowLeft" && td.cellIndex > 1) target = tr.cells[td.cellIndex - 1];
    if (ev.key === "ArrowDown" && tr.sectionRowIndex + 1 < rows.length) target = rows[tr.sectionRowIndex + 1].cells[td.cellIndex];
    if (ev.key === "ArrowUp" && tr.sectionRowIndex > 0) target = rows[tr.sectionRowIndex - 1].cells[td.cellIndex];
    if (target) {
      ev.preventDefault();
      focusCell(target);
    }
  }, true);

  document.addEventListener("dblclick", function (ev) {
    const td = ev.target.closest && ev.target.closest("table[data-edit] td");
    if (td) startEdit(td);
  });

  // Leaving the box (a click elsewhere, Tab) commits what it holds.
  document.addEventListener("focusout", function (ev) {
    if (ev.target.matches && ev.target.matches("input.cell-edit")) finishEdit(ev.target, true);
  });

  // The swap replaces the table: the focus goes back to the same cell of the new one.
  document.addEventListener("htmx:beforeSwap", function () {
    const td = document.activeElement && document.activeElement.closest && document.activeElement.closest("table[data-edit] td");
    refocus = td ? [td.closest("table").dataset.ref].concat(where(td)) : null;
  });
  document.addEventListener("DOMContentLoaded", prepare);
  document.addEventListener("htmx:afterSettle", prepare);
})();

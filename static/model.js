// "Your sentence" and "Next word": Enter in the text runs the model; a head's selection marks its map; a click on a cell of the step-through's scores, scaled scores, weights or output inspects it
// (the form's matrix, row and column fields, then the form's own submit, which htmx sends). No inline handlers.
(function () {
  "use strict";
  // A sentence box sends itself as it is typed (its own trigger): the "change" it fires on blur must not
  // also send the form, whose older answer could land after the one of the map just clicked.
  document.addEventListener("change", function (ev) {
    if (ev.target.matches && ev.target.matches("#model-form textarea")) ev.stopPropagation();
  }, true);
  // Enter in the text runs the model (the form's own submit, which htmx sends); Shift+Enter makes a new line.
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.altKey) return;
    const box = ev.target.closest && ev.target.closest("#decoder-form textarea#text, #model-form .sentences textarea");
    if (!box || !box.form) return;
    ev.preventDefault();
    box.form.requestSubmit();
  });
  // A head's selection swaps its step-through alone (#steps, which names its head in data-at): the maps mark it.
  document.addEventListener("htmx:afterSettle", function () {
    const steps = document.getElementById("steps");
    if (!steps || !steps.dataset.at) return;
    document.querySelectorAll(".thumb[data-at]").forEach(function (t) {
      const chosen = t.dataset.at === steps.dataset.at;
      t.classList.toggle("selected", chosen);
      if (chosen) t.setAttribute("aria-current", "true"); else t.removeAttribute("aria-current");
    });
  });
  // Ticking a head (or a layer) off redraws the workspace: the cosine it changes is brought back into view, where
  // the swap would leave the reader wherever the new page's height put them.
  let offTicked = false;
  document.addEventListener("change", function (ev) {
    if (ev.target.matches && ev.target.matches('#switch input[name="off"], #switch input[name="off_layer"]')) offTicked = true;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!offTicked) return;
    offTicked = false;
    const cosines = document.querySelector("#switch .cosines");
    if (cosines) cosines.scrollIntoView({ block: "center" });
  });
  document.addEventListener("click", function (ev) {
    const td = ev.target.closest && ev.target.closest("#steps .mpanel table.heatmap[data-ref] td");
    if (!td) return;
    const table = td.closest("table");
    const form = td.closest("form");
    const matrix = document.getElementById("inspect-matrix");
    if (!form || !matrix || !Array.from(matrix.options).some(function (o) { return o.value === table.dataset.ref; })) return;
    matrix.value = table.dataset.ref;
    document.getElementById("inspect-row").value = td.parentElement.rowIndex; // the header row is row 0: rows count from 1
    document.getElementById("inspect-col").value = td.cellIndex; // the row header is cell 0
    // Where the step-through asks for itself alone (its "Step through" button, outside a class), it is that ask.
    const own = document.querySelector('#steps button[hx-target="#steps"]');
    if (own) own.click(); else form.requestSubmit();
  });
})();

// "Your sentence" and "Next word": a click on a cell of the step-through's scores, scaled scores, weights or output inspects it
// (the form's matrix, row and column fields, then the form's own submit, which htmx sends). No inline handlers.
(function () {
  "use strict";
  // A sentence box sends itself as it is typed (its own trigger): the "change" it fires on blur must not
  // also send the form, whose older answer could land after the one of the map just clicked.
  document.addEventListener("change", function (ev) {
    if (ev.target.matches && ev.target.matches("#model-form textarea")) ev.stopPropagation();
  }, true);
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
    form.requestSubmit();
  });
})();

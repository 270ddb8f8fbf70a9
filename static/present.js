// Presenter mode: Escape leaves it (the Exit button does the same without JavaScript). No inline handlers.
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
})();

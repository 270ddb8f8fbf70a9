// The printed handout (app.web.handout). No inline handlers: CSP-friendly.
(function () {
  "use strict";
  if (document.documentElement.dataset.handoutScript) return;  // the page may load it again with a swap
  document.documentElement.dataset.handoutScript = "on";

  // The handout's Print button: shown only where a script can press it.
  const print = document.getElementById("print-handout");
  if (print) {
    print.hidden = false;
    print.addEventListener("click", function () { window.print(); });
  }

  // "Print handout" for a state too large for a link (templates/partials/stage_body.html) posts the page's form to
  // /handout in a new tab. htmx would take that submit and swap the handout into the page, so the click is caught
  // first (capture phase) and the form is submitted natively, which fires no submit event for htmx to see.
  document.addEventListener("click", function (ev) {
    const button = ev.target.closest && ev.target.closest("button[data-new-tab]");
    if (!button || !button.form) return;
    ev.preventDefault();
    ev.stopPropagation();
    const form = button.form;
    const saved = ["action", "method", "target"].map(function (name) { return [name, form.getAttribute(name)]; });
    form.setAttribute("action", button.formAction);
    form.setAttribute("method", "post");
    form.setAttribute("target", "_blank");
    HTMLFormElement.prototype.submit.call(form);
    saved.forEach(function (pair) {
      if (pair[1] === null) form.removeAttribute(pair[0]); else form.setAttribute(pair[0], pair[1]);
    });
  }, true);
})();

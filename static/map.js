// The pipeline map: a stage's link posts the form with htmx (hx-post, hx-vals); its href is the stage's
// permalink, for a browser without JavaScript. No inline handlers: CSP-friendly.
(function () {
  "use strict";

  // Links htmx has wired up. htmx wires a swapped-in map up only when it settles (20 ms later): a click or an
  // Enter in between wires the link up here and hands the click to htmx.
  const ready = new WeakSet();
  document.addEventListener("htmx:afterProcessNode", function (ev) { ready.add(ev.target); });

  // An SVG <a> is not an HTMLAnchorElement, so htmx does not stop the browser from also following its href:
  // stop it here. A click with a modifier key opens the permalink, as a link does.
  document.addEventListener("click", function (ev) {
    const link = ev.target.closest && ev.target.closest(".pipeline-map a[hx-post]");
    if (!link || !window.htmx || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    ev.preventDefault();
    if (!ready.has(link)) {
      window.htmx.process(link);
      window.htmx.trigger(link, "click");
    }
  });
})();

// "Embed" under each stage (templates/partials/embed_snippet.html): the <iframe> code made absolute from the page's
// own address when the box opens, and copied by its button (the clipboard, or the text selected for Ctrl+C).
// No inline handlers: CSP-friendly. Loaded once, whatever swaps follow: the listeners are on the document.
(function () {
  "use strict";
  if (window.attentionEmbedBox) return;
  window.attentionEmbedBox = true;

  const amp = (s) => s.replace(/&/g, "&amp;");

  function absolute(textarea) {
    const path = textarea.dataset.embedSrc;
    if (!path || textarea.dataset.absolute) return;
    const url = new URL(path, document.baseURI).href;
    textarea.value = textarea.value.split('src="' + amp(path) + '"').join('src="' + amp(url) + '"');
    textarea.dataset.absolute = "1";
  }

  document.addEventListener("toggle", function (ev) {
    const box = ev.target;
    if (box.matches && box.matches("details.embed-box") && box.open) box.querySelectorAll("textarea").forEach(absolute);
  }, true);

  document.addEventListener("click", function (ev) {
    const button = ev.target.closest && ev.target.closest("button.embed-copy");
    const textarea = button && document.getElementById(button.dataset.copy);
    if (!textarea) return;
    absolute(textarea);
    const status = button.parentElement.querySelector("[role='status']");
    const say = (text) => { if (status) status.textContent = text; };
    const select = function () {
      textarea.focus();
      textarea.select();
      say(t("Selected: press Ctrl+C (⌘C) to copy."));
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(textarea.value).then(function () { say(t("Copied.")); }, select);
    } else {
      select();
    }
  });
})();

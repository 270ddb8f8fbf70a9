// The page's scripts in the reader's language: t("English text") is the text in the page's language, read from
// the catalogue the server puts in <script type="application/json" id="messages"> (app.web.js_messages), and
// t("Row {row}", {row: 3}) fills its placeholders. A message missing there is shown in English.
(function () {
  "use strict";
  let messages = null;
  function catalogue() {
    if (messages === null) {
      const node = document.getElementById("messages");
      try { messages = node ? JSON.parse(node.textContent) : {}; } catch (e) { messages = {}; }
    }
    return messages;
  }
  window.t = function (text, values) {
    let out = catalogue()[text] || text;
    if (values) out = out.replace(/\{(\w+)\}/g, (all, name) => (name in values ? String(values[name]) : all));
    return out;
  };
  // Numbers as the page's language writes them: the decimal comma (fr, de, es) and a true minus.
  window.localNumber = function (text) {
    const comma = document.documentElement.dataset.decimal === ",";
    const s = String(text).replace(/-/g, "\u2212");
    return comma ? s.replace(/\./g, ",") : s;
  };
})();

// The header's language selector (templates/language.html) switches at once. The scenario page posts its form
// (every edit, the stage, the view) to its own address with ?lang=, so the page comes back whole in the new
// language; a page whose address holds its state (a real model, the language model, a class) reloads it
// with ?lang=. The server keeps the choice in a cookie.
document.addEventListener("change", function (ev) {
  const select = ev.target.closest ? ev.target.closest("select[data-language]") : null;
  if (!select) return;
  const lang = select.value;
  const state = document.getElementById("state");
  if (state && state.method === "post" && new URL(state.action, location.href).pathname === location.pathname) {
    const action = new URL(state.action, location.href);
    action.searchParams.set("lang", lang);
    state.setAttribute("action", action.pathname + action.search);
    state.removeAttribute("hx-post");
    HTMLFormElement.prototype.submit.call(state);
    return;
  }
  const here = new URL(location.href);
  here.searchParams.set("lang", lang);
  location.assign(here.pathname + here.search + here.hash);
});

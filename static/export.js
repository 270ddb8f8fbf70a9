// Download buttons: a panel's matrix as CSV, JSON or LaTeX, the whole run as JSON, or the scenario
// (button[data-download], posted as it is), saved as a file.
// Without JavaScript each button posts the page's form to /export and the browser downloads the
// answer. Here htmx would take that submit and swap the file into the page, so the click is caught
// first (capture phase), the same form is posted with fetch, and the answer is saved through a
// temporary <a download>. No inline handlers: CSP-friendly.
(function () {
  "use strict";

  // The server names the file (ASCII, from the panel's ref): take it from Content-Disposition.
  function filename(response) {
    const match = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    return match ? match[1] : "export";
  }

  function save(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    a.hidden = true;
    document.body.appendChild(a);
    a.click();
    a.remove();
    // Revoked later, not at once: some browsers still read the URL after click() returns.
    setTimeout(function () { URL.revokeObjectURL(url); }, 40000);
  }

  // A message beside the buttons (a 422 names the problem); empty after a good export.
  function say(button, text) {
    const home = button.closest("details.export, .export-run") || button.parentElement;
    let slot = home.querySelector(".export-error");
    if (!slot) {
      if (!text) return;
      slot = document.createElement("p");
      slot.className = "export-error";
      slot.setAttribute("role", "alert");
      home.appendChild(slot);
    }
    slot.textContent = text;
  }

  function problem(response) {
    return response.json().then(function (body) {
      const detail = body && body.detail;
      return Array.isArray(detail) ? detail.map(function (d) { return d.msg; }).join("; ") : String(detail);
    }, function () { return t("export failed (HTTP {status})", { status: response.status }); });
  }

  document.addEventListener("click", function (ev) {
    const button = ev.target.closest && ev.target.closest('button[name="export"], button[data-download]');
    if (!button || !button.form) return;
    ev.preventDefault();
    ev.stopPropagation();
    const data = new URLSearchParams(new FormData(button.form));
    if (button.name === "export") {
      const cut = button.value.lastIndexOf("|");
      data.set("export_ref", button.value.slice(0, cut));
      data.set("export_format", button.value.slice(cut + 1));
    }
    button.setAttribute("aria-busy", "true");
    fetch(button.formAction, { method: "POST", body: data, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) return problem(response).then(function (text) { say(button, text); });
        return response.blob().then(function (blob) {
          save(blob, filename(response));
          say(button, "");
        });
      })
      .catch(function () { say(button, t("export failed: the server did not answer")); })
      .finally(function () { button.removeAttribute("aria-busy"); });
  }, true);
})();

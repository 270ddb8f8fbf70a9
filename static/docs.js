// Starts Swagger UI on /docs from a file, so the docs page needs no inline script.
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({ url: root.dataset.openapi, dom_id: "#swagger-ui", deepLinking: true });
})();

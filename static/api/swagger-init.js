"use strict";
// Starts Swagger UI on the API docs page (/api/docs/) from the settings in #swagger-ui's data
// attributes: the schema's URL, and the CSRF header that writes tried out with the browser's
// session need (token requests send "Authorization: Bearer ..." from the Authorize dialog).
(function () {
  const root = document.getElementById("swagger-ui");
  const csrfHeader = root.dataset.csrfHeader;
  const csrfToken = root.dataset.csrfToken;
  window.ui = SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    requestInterceptor: (request) => {
      if (!["GET", "HEAD", undefined].includes(request.method) && csrfToken) {
        request.headers[csrfHeader] = csrfToken;
      }
      return request;
    },
  });
})();

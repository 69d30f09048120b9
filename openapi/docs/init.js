// Starts Swagger UI on the document this spliced serves. No external URL is
// contacted: the bundle and the stylesheet are embedded in the binary, and
// "Try it out" talks to the same origin.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
});

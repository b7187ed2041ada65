// Behaviour of the screens that is not htmx's, kept in this file because the Content-Security-Policy
// of the screens allows no inline script or event-handler attribute.

// A form with data-confirm="question" asks before it is sent (the rerun buttons).
document.addEventListener("submit", (event) => {
  const question = event.target.dataset ? event.target.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

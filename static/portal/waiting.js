// The dashboard's "What waits, and why" of each team card: the list is read from the clusters,
// so the dashboard does not wait for it; this asks the team's waiting page for its list once
// the dashboard is shown and puts it in place of the card's link. Loaded from a file: the CSP
// allows no inline script. The card is aria-busy until its list is in place (or the link stays).
(function () {
  for (const box of document.querySelectorAll("[data-waiting-url]")) {
    box.setAttribute("aria-busy", "true");
    fetch(box.dataset.waitingUrl, {headers: {"Accept": "text/html"}, credentials: "same-origin"})
      .then((response) => (response.ok ? response.text() : Promise.reject(response.status)))
      .then((text) => {
        const doc = new DOMParser().parseFromString(text, "text/html");
        const list = doc.querySelector("[data-waiting-list]");
        const slot = box.querySelector("[data-waiting-slot]");
        if (list && slot) slot.replaceWith(document.importNode(list, true));
      })
      .catch(() => {
        // The link to the page stays: it tells the same.
      })
      .finally(() => box.removeAttribute("aria-busy"));
  }
})();

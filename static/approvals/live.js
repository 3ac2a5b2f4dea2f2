// Live status of the request pages (a request's page, the list and the admins' queue): asks
// the page's live URL about once a second for its live parts and puts each one in place of
// the page's element with the same data-live-part. Loaded from a file: the CSP allows no
// inline script.
//
// Cheap by design: a poll sends the ETag of the parts it has, and the server answers 304
// while nothing changed. No poll while the tab is hidden, none once the request is settled
// (nothing more happens to it by itself), none after the server refused (session ended).
(function () {
  const root = document.getElementById("live");
  if (!root || !root.dataset.liveUrl) return;
  const INTERVAL = 1000; // ms between the end of one poll and the next: changes show within 2 s
  const RETRY = 5000; // after a server error or a lost connection
  // A request's page says which actions its buttons offer; a list has none.
  const actions = root.dataset.liveActions;
  let etag = "";
  let timer = null;
  let busy = false;
  let stopped = root.dataset.liveFinal === "1";

  function address() {
    const url = new URL(root.dataset.liveUrl, window.location.href);
    if (actions === undefined) {
      // The rows the list shows, wherever their requests are now.
      const ids = Array.from(document.querySelectorAll("[data-live-part^='status-']"))
        .map((el) => el.dataset.livePart.slice("status-".length));
      url.searchParams.set("ids", ids.join(","));
    }
    return url;
  }

  function swap(doc) {
    for (const part of doc.querySelectorAll("[data-live-part]")) {
      const name = part.dataset.livePart;
      const here = document.querySelector("[data-live-part='" + CSS.escape(name) + "']");
      if (here) here.replaceWith(document.importNode(part, true));
    }
    const fresh = doc.querySelector("[data-live-root]");
    if (!fresh) return;
    if (actions !== undefined && fresh.dataset.liveActions !== actions) {
      const notice = root.querySelector("[data-live-notice]");
      if (notice) notice.classList.remove("hidden");
    }
    if (fresh.dataset.liveFinal === "1") stopped = true;
  }

  function stop(text) {
    stopped = true;
    const note = root.querySelector("[data-live-stopped]");
    if (!note) return;
    note.textContent = text || root.dataset.textStopped || "";
    note.classList.remove("hidden");
  }

  async function refusal(response) {
    // The server's reason (approvals/live/refused.html), if it sent one.
    try {
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const reason = doc.querySelector("[data-live-refused]");
      return reason ? reason.textContent : "";
    } catch (err) {
      return "";
    }
  }

  function schedule(delay) {
    if (stopped || document.hidden || timer !== null || busy) return;
    timer = setTimeout(ask, delay);
  }

  async function ask() {
    timer = null;
    if (stopped || document.hidden) return;
    busy = true;
    let delay = INTERVAL;
    try {
      const headers = {"Accept": "text/html"};
      if (etag) headers["If-None-Match"] = etag;
      const response = await fetch(address(), {
        headers: headers,
        credentials: "same-origin",
        cache: "no-store",
      });
      if (response.status === 200) {
        const text = await response.text();
        etag = response.headers.get("ETag") || "";
        swap(new DOMParser().parseFromString(text, "text/html"));
      } else if (response.status >= 400 && response.status < 500) {
        stop(await refusal(response)); // gone, not allowed, or signed out: asking again won't help
      } else if (response.status !== 304) {
        delay = RETRY;
      }
    } catch (err) {
      delay = RETRY; // the connection dropped: the next poll tries again
    } finally {
      busy = false;
    }
    schedule(delay);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else {
      schedule(0); // back on the tab: bring it up to date at once
    }
  });
  schedule(INTERVAL);
})();

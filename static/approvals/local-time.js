// Moments written by the server in UTC (<time data-local-time datetime="...">) shown in the
// reader's own time zone, as "2026-12-02 20:40 (Asia/Shanghai)"; the UTC text stays the
// title. Without scripts the UTC text is what the reader sees.
(function () {
  "use strict";
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function localize(node) {
    var moment = new Date(node.getAttribute("datetime"));
    if (isNaN(moment.getTime())) { return; }
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
    var text = moment.getFullYear() + "-" + two(moment.getMonth() + 1) + "-" + two(moment.getDate()) +
      " " + two(moment.getHours()) + ":" + two(moment.getMinutes());
    if (!node.title) { node.title = node.textContent; }
    node.textContent = zone ? text + " (" + zone + ")" : text;
    node.setAttribute("data-localized", zone || "local");
  }
  function run() {
    var nodes = document.querySelectorAll("time[data-local-time]");
    for (var i = 0; i < nodes.length; i++) { localize(nodes[i]); }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();

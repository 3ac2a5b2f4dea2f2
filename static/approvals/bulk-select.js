// The queue's "select every request of the page" box ticks or clears the rows' boxes.
(function () {
  "use strict";
  function run() {
    var all = document.querySelector("input[data-select-all]");
    if (!all) { return; }
    all.addEventListener("change", function () {
      var boxes = document.querySelectorAll("input[name=ids][form=bulk-form]");
      for (var i = 0; i < boxes.length; i++) { boxes[i].checked = all.checked; }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", run);
  } else {
    run();
  }
})();

// Draws the usage charts whose plotly figures the page put in #usage-chart-data.
(function () {
  "use strict";
  var source = document.getElementById("usage-chart-data");
  if (!source || typeof Plotly === "undefined") { return; }
  JSON.parse(source.textContent).forEach(function (chart) {
    var element = document.getElementById(chart.id);
    if (element) {
      Plotly.newPlot(element, chart.figure.data, chart.figure.layout, { responsive: true, displaylogo: false });
      element.setAttribute("data-drawn", "true");
    }
  });
})();

// Draws the usage charts whose plotly figures the page put in #usage-chart-data.
(function () {
  "use strict";
  var source = document.getElementById("usage-chart-data");
  if (!source || typeof Plotly === "undefined") { return; }
  // plotly.js' own words in the page's language (plotly_locale_zh.js registers zh-CN).
  var locale = document.documentElement.lang === "zh-hans" ? "zh-CN" : "en";
  JSON.parse(source.textContent).forEach(function (chart) {
    var element = document.getElementById(chart.id);
    if (element) {
      Plotly.newPlot(element, chart.figure.data, chart.figure.layout, {
        responsive: true,
        displaylogo: false,
        locale: locale,
        // Sharing would send the chart to plotly's cloud: the portal's figures stay here.
        modeBarButtonsToRemove: ["sendChartToCloud"]
      });
      element.setAttribute("data-drawn", "true");
    }
  });
})();

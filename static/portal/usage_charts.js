// Draws the usage charts whose plotly figures the page put in #usage-chart-data.
// Narrow charts (a phone's) keep their title whole, on as many lines as it needs, and their day
// labels apart: no more ticks of whole days (or months) than the plot's width holds, and their
// legend under the plot, so that the legend does not take the plot's width.
(function () {
  "use strict";
  var source = document.getElementById("usage-chart-data");
  if (!source || typeof Plotly === "undefined") { return; }
  // plotly.js' own words in the page's language (plotly_locale_zh.js registers zh-CN).
  var locale = document.documentElement.lang === "zh-hans" ? "zh-CN" : "en";
  var DAY_MS = 86400000;
  var TICK_PX = 90;  // the width a "2026-11-03" label needs, with room between labels
  var NARROW_PX = 600;  // below this a legend beside the plot would leave the plot too little

  function wrapped(text, perLine) {
    var lines = [], line = "";
    text.split(" ").forEach(function (word) {
      if (line && (line + " " + word).length > perLine) { lines.push(line); line = word; }
      else { line = line ? line + " " + word : word; }
    });
    if (line) { lines.push(line); }
    return lines;
  }

  function fitted(layout, data, width) {
    layout = Object.assign({}, layout);
    var margin = Object.assign({ t: 40, b: 40, l: 50, r: 10 }, layout.margin || {});
    var title = layout.title && layout.title.text ? Object.assign({}, layout.title) : null;
    if (title && title.text.indexOf("<br>") < 0) {
      var size = (title.font && title.font.size) || (width < NARROW_PX ? 14 : 17);
      var lines = wrapped(title.text, Math.max(12, Math.floor((width - 24) / (size * 0.6))));
      title.text = lines.join("<br>");
      title.font = Object.assign({}, title.font || {}, { size: size });
      margin.t = Math.max(margin.t, Math.ceil(16 + lines.length * size * 1.3));
      layout.title = title;
    }
    if (width < NARROW_PX && layout.showlegend !== false) {
      layout.legend = Object.assign({}, layout.legend || {}, {
        orientation: "h", x: 0, xanchor: "left", y: -0.18, yanchor: "top"
      });
      margin.r = Math.min(margin.r, 10);
    }
    var xaxis = Object.assign({}, layout.xaxis || {});
    var fit = Math.max(1, Math.floor(Math.max(width - margin.l - margin.r, TICK_PX) / TICK_PX));
    var days = daySpan(data);
    var monthly = typeof xaxis.dtick === "string" && /^M\d+$/.test(xaxis.dtick);
    if (monthly && days) {
      // A tick a month (the showback's): every few months when they do not all fit.
      var months = Math.round(days / 30.44) + 1;
      if (Math.ceil(months / parseInt(xaxis.dtick.slice(1), 10)) > fit) {
        xaxis.dtick = "M" + Math.ceil(months / fit);
      }
    } else if (xaxis.dtick && days) {
      if (Math.ceil(days * DAY_MS / xaxis.dtick) > fit) {
        xaxis.dtick = Math.ceil(days / fit) * DAY_MS;  // still whole days
      }
    } else if (days) {
      xaxis.nticks = Math.min(xaxis.nticks || fit, fit);
    }
    xaxis.automargin = true;
    layout.xaxis = xaxis;
    layout.margin = margin;
    return layout;
  }

  function daySpan(data) {
    var lo = Infinity, hi = -Infinity;
    data.forEach(function (trace) {
      (trace.x || []).forEach(function (x) {
        var t = typeof x === "string" && /^\d{4}-\d{2}-\d{2}/.test(x) ? Date.parse(x) : NaN;
        if (!isNaN(t)) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
      });
    });
    return hi > lo ? Math.round((hi - lo) / DAY_MS) + 1 : 0;
  }

  JSON.parse(source.textContent).forEach(function (chart) {
    var element = document.getElementById(chart.id);
    if (element) {
      var layout = fitted(chart.figure.layout, chart.figure.data, element.clientWidth || 600);
      Plotly.newPlot(element, chart.figure.data, layout, {
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

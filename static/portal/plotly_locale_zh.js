// The words plotly.js itself shows around a chart (modebar buttons, hints) in Simplified
// Chinese, registered as its "zh-CN" locale; usage_charts.js picks it on pages in zh-hans.
(function () {
  "use strict";
  if (typeof Plotly === "undefined") { return; }
  Plotly.register({
    moduleType: "locale",
    name: "zh-CN",
    dictionary: {
      "Autoscale": "自动缩放",
      "Box Select": "框选",
      "Compare data on hover": "悬停时比较数据",
      "Double-click to zoom back out": "双击以缩小回原样",
      "Download plot": "下载图表",
      "Download plot as a PNG": "下载图表为 PNG",
      "Download plot as a png": "下载图表为 PNG",
      "Lasso Select": "套索选择",
      "Pan": "平移",
      "Produced with Plotly.js": "由 Plotly.js 生成",
      "Reset axes": "重置坐标轴",
      "Reset view": "重置视图",
      "Show closest data on hover": "悬停时显示最近的数据",
      "Snapshot succeeded": "截图成功",
      "Taking snapshot - this may take a few seconds": "正在截图，可能需要几秒钟",
      "Toggle Spike Lines": "切换辅助线",
      "Zoom": "缩放",
      "Zoom in": "放大",
      "Zoom out": "缩小"
    },
    format: {
      days: ["星期日", "星期一", "星期二", "星期三", "星期四", "星期五", "星期六"],
      shortDays: ["周日", "周一", "周二", "周三", "周四", "周五", "周六"],
      months: ["一月", "二月", "三月", "四月", "五月", "六月", "七月", "八月", "九月", "十月", "十一月", "十二月"],
      shortMonths: ["1月", "2月", "3月", "4月", "5月", "6月", "7月", "8月", "9月", "10月", "11月", "12月"],
      date: "%Y-%m-%d"
    }
  });
})();

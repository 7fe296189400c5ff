// The endpoint forms' destination choice: only the chosen kind's fieldset
// is shown, and posted (the others are disabled). Without script every
// fieldset shows, and the server reads the chosen kind's only.
(function () {
  "use strict";
  document.querySelectorAll("select[data-destination]").forEach(function (choice) {
    var sets = choice.form.querySelectorAll("fieldset[data-kind]");
    function show() {
      sets.forEach(function (set) {
        var on = set.getAttribute("data-kind") === choice.value;
        set.hidden = !on;
        set.disabled = !on;
      });
    }
    choice.addEventListener("change", show);
    show();
  });
})();

// Draws the dashboard's charts (uPlot) from the JSON in their data-series
// attribute: {"step": seconds, "points": [{"at", "success", "retry",
// "dead", "held_back", "p50_ms", "p99_ms"}]}. Lines differ by dash as well
// as by colour, and the legend names them.
(function () {
  "use strict";
  function chart(el) {
    var d = JSON.parse(el.getAttribute("data-series"));
    var xs = d.points.map(function (p) { return Date.parse(p.at) / 1000; });
    var latency = el.getAttribute("data-kind") === "latency";
    var lines = latency
      ? [["p50 ms", "p50_ms", "#2a56c6", []], ["p99 ms", "p99_ms", "#a11d2b", [6, 4]]]
      : [["delivered", "success", "#1b6e3a", []], ["retried", "retry", "#8a5a00", [6, 4]],
         ["dead", "dead", "#a11d2b", [2, 3]], ["held back", "held_back", "#5b6475", [10, 3, 2, 3]]];
    var data = [xs];
    var series = [{}];
    lines.forEach(function (l) {
      data.push(d.points.map(function (p) { return p[l[1]]; }));
      series.push({ label: l[0], stroke: l[2], dash: l[3], width: 2, spanGaps: latency, points: { show: latency ? true : undefined, size: 5 } });
    });
    var width = function () { return Math.max(280, el.clientWidth); };
    var u = new uPlot({ width: width(), height: 220, series: series,
      axes: [{}, { label: latency ? "ms" : "attempts" }], legend: { live: false } }, data, el);
    window.addEventListener("resize", function () { u.setSize({ width: width(), height: 220 }); });
  }
  document.querySelectorAll("[data-series]").forEach(chart);
})();


/* Small SVG charts for the dashboard: interval plot, line chart, sparkline. No dependencies. */
"use strict";

(function (global) {
  const NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, parent, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function frame(container, width, height, label) {
    const svg = el("svg", {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": label,
      preserveAspectRatio: "xMidYMid meet",
    });
    container.replaceChildren(svg);
    return svg;
  }

  function finite(x) {
    return typeof x === "number" && Number.isFinite(x);
  }

  function clamp01(x) {
    return Math.max(0, Math.min(1, x));
  }

  function shortNumber(x) {
    if (!finite(x)) return "–";
    const a = Math.abs(x);
    if (a >= 1e6) return (x / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (x / 1e3).toFixed(0) + "k";
    if (a >= 1e3) return (x / 1e3).toFixed(1) + "k";
    return Math.round(x).toString();
  }

  /* Per-arm posterior means (dots) with credible intervals (bars), on a 0..1 axis. */
  function intervals(container, arms) {
    const rowH = 26;
    const left = 170;
    const right = 90;
    const width = 720;
    const top = 8;
    const height = top + arms.length * rowH + 26;
    const svg = frame(container, width, height, "posterior mean and credible interval per arm");
    const plotW = width - left - right;
    const x = (v) => left + clamp01(v) * plotW;
    for (const t of [0, 0.25, 0.5, 0.75, 1]) {
      el("line", { x1: x(t), x2: x(t), y1: top - 4, y2: height - 22, class: "axis" }, svg);
      el("text", { x: x(t), y: height - 6, "text-anchor": "middle", class: "axis-label" }, svg,
        t.toFixed(2));
    }
    arms.forEach((arm, i) => {
      const cy = top + i * rowH + rowH / 2;
      const name = String(arm.id);
      const label = name.length > 24 ? name.slice(0, 23) + "…" : name;
      const tip = el("g", {}, svg);
      el("title", {}, tip,
        `${name}: mean ${fmt(arm.mean)}, 95% CI ${fmt(arm.ci_low)}–${fmt(arm.ci_high)}, ` +
        `${arm.pulls} pulls, confidence ${arm.confidence}`);
      el("text", { x: left - 10, y: cy + 4, "text-anchor": "end", class: "bar-label" }, tip, label);
      if (finite(arm.ci_low) && finite(arm.ci_high)) {
        el("line", { x1: x(arm.ci_low), x2: x(arm.ci_high), y1: cy, y2: cy, class: "ci" }, tip);
      }
      if (finite(arm.mean)) el("circle", { cx: x(arm.mean), cy, r: 5, class: "mean" }, tip);
      el("text", { x: width - right + 10, y: cy + 4, class: "bar-note" }, tip,
        `${shortNumber(arm.pulls)} pulls · ${arm.confidence || "none"}`);
    });
  }

  function fmt(v) {
    return finite(v) ? v.toFixed(3) : "–";
  }

  /* Line chart of several series over time; series = [{name, cls, points: [[t, y], ...]}]. */
  function lines(container, series, opts) {
    const width = 480;
    const height = 220;
    const pad = { l: 48, r: 10, t: 10, b: 26 };
    const svg = frame(container, width, height, opts.label);
    const all = series.flatMap((s) => s.points).filter((p) => finite(p[0]) && finite(p[1]));
    if (!all.length) return false;
    let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
    let [y0, y1] = [Math.min(0, ...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) y1 = y0 + 1;
    y1 += (y1 - y0) * 0.08;
    const X = (v) => pad.l + ((v - x0) / (x1 - x0)) * (width - pad.l - pad.r);
    const Y = (v) => height - pad.b - ((v - y0) / (y1 - y0)) * (height - pad.t - pad.b);
    for (let i = 0; i <= 4; i++) {
      const v = y0 + ((y1 - y0) * i) / 4;
      el("line", { x1: pad.l, x2: width - pad.r, y1: Y(v), y2: Y(v), class: "axis" }, svg);
      el("text", { x: pad.l - 6, y: Y(v) + 4, "text-anchor": "end", class: "axis-label" }, svg,
        shortNumber(v));
    }
    el("text", { x: pad.l, y: height - 6, class: "axis-label" }, svg, opts.xStart || "");
    el("text", { x: width - pad.r, y: height - 6, "text-anchor": "end", class: "axis-label" }, svg,
      opts.xEnd || "");
    for (const s of series) {
      const pts = s.points.filter((p) => finite(p[0]) && finite(p[1]));
      if (!pts.length) continue;
      const d = pts.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
      el("path", { d: d.join(" "), class: s.cls }, svg);
      const last = pts[pts.length - 1];
      el("circle", { cx: X(last[0]), cy: Y(last[1]), r: 3, class: s.cls.replace("line", "dot") }, svg);
    }
    return true;
  }

  /* The session trend under the score: running total, oldest first. */
  function sparkline(container, points) {
    const width = 320;
    const height = 64;
    const pts = points.filter((p) => finite(p[0]) && finite(p[1]));
    if (pts.length < 2) {
      container.replaceChildren();
      return false;
    }
    const svg = frame(container, width, height, "running total this session");
    const ys = pts.map((p) => p[1]);
    let [y0, y1] = [Math.min(0, ...ys), Math.max(0, ...ys)];
    if (y1 === y0) y1 = y0 + 1;
    const n = pts.length - 1;
    const X = (i) => 2 + (i / n) * (width - 4);
    const Y = (v) => height - 2 - ((v - y0) / (y1 - y0)) * (height - 4);
    const line = pts.map((p, i) => `${i ? "L" : "M"}${X(i).toFixed(1)},${Y(p[1]).toFixed(1)}`);
    el("line", { x1: 0, x2: width, y1: Y(0), y2: Y(0), class: "zero" }, svg);
    el("path", { d: `${line.join(" ")} L${X(n)},${Y(0)} L${X(0)},${Y(0)} Z`, class: "spark-area" }, svg);
    el("path", { d: line.join(" "), class: "spark-line" }, svg);
    return true;
  }

  global.PlauditCharts = { intervals, lines, sparkline, shortNumber };
})(window);

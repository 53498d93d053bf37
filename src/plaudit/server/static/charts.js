/* Small SVG charts for the dashboard: interval plot, line chart, convergence tiles, sparkline.
   No dependencies. Charts are drawn at the pixel width of their container (one SVG unit is one
   CSS pixel), so text keeps its size on a phone and labels are measured, not guessed: nothing
   is scaled down to illegibility or cut off at the card's edge. The dashboard redraws them when
   the window is resized. */
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

  function widthOf(container, fallback) {
    const w = Math.floor(container.clientWidth || 0);
    return w > 0 ? Math.max(200, w) : fallback;
  }

  function frame(container, width, height, label) {
    const svg = el("svg", {
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": label,
    });
    container.replaceChildren(svg);
    return svg;
  }

  /* Width in px of each string drawn with `cls`, measured in `svg` (which must be attached). */
  function measure(svg, cls, strings) {
    const probe = el("text", { x: -9999, y: -9999, class: cls }, svg);
    const out = strings.map((s) => {
      probe.textContent = s;
      return probe.getComputedTextLength();
    });
    probe.remove();
    return out;
  }

  /* `text` cut with an ellipsis so that it fits in `max` px when drawn with `cls`. */
  function fit(svg, cls, text, max) {
    if (measure(svg, cls, [text])[0] <= max) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (measure(svg, cls, [text.slice(0, mid) + "…"])[0] <= max) lo = mid;
      else hi = mid - 1;
    }
    return text.slice(0, lo) + "…";
  }

  function finite(x) {
    return typeof x === "number" && Number.isFinite(x);
  }

  function clamp01(x) {
    return Math.max(0, Math.min(1, x));
  }

  /* Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten. */
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / Math.max(1, count);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || 10 * power;
    const first = Math.floor(lo / step + 1e-9) * step;
    const ticks = [];
    for (let v = first; v < hi + step - 1e-9 * step; v += step) {
      ticks.push(Math.round(v / step) * step);
      if (ticks.length > 50) break;
    }
    return ticks;
  }

  function shortNumber(x) {
    if (!finite(x)) return "–";
    const a = Math.abs(x);
    const trim = (v, d) => String(Number(v.toFixed(d)));
    if (a >= 1e6) return trim(x / 1e6, 2) + "M";
    if (a >= 1e3) return trim(x / 1e3, 2) + "k";
    return trim(x, a >= 1 || a === 0 ? 1 : 3);
  }

  function fmt(v) {
    return finite(v) ? v.toFixed(3) : "–";
  }

  /* Per-arm posterior means (dots) with credible intervals (bars), on a 0..1 axis. Wide: one
     line per arm (label | interval | note). Narrow: label and note above a full-width bar. */
  function intervals(container, arms) {
    const width = widthOf(container, 720);
    const svg = frame(container, width, 10, "posterior mean and credible interval per arm");
    const names = arms.map((a) => String(a.id));
    const notes = arms.map(
      (a) => `${shortNumber(a.pulls)} pulls · ${a.confidence || "none"}${a.underexplored ? " · under-explored" : ""}`,
    );
    const nameW = Math.max(...measure(svg, "bar-label", names));
    const noteW = Math.max(...measure(svg, "bar-note", notes));
    const wide = width >= 560;
    const left = wide ? Math.min(Math.ceil(nameW) + 12, Math.floor(width * 0.32)) : 8;
    const right = wide ? Math.ceil(noteW) + 14 : 8;
    const rowH = wide ? 26 : 40;
    const top = 8;
    const height = top + arms.length * rowH + 26;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("height", height);
    const plotW = width - left - right;
    const x = (v) => left + clamp01(v) * plotW;
    const ticks = plotW >= 300 ? [0, 0.25, 0.5, 0.75, 1] : [0, 0.5, 1];
    for (const t of ticks) {
      el("line", { x1: x(t), x2: x(t), y1: top - 4, y2: height - 22, class: "axis" }, svg);
      const anchor = t === 0 && !wide ? "start" : t === 1 && !wide ? "end" : "middle";
      el("text", { x: x(t), y: height - 6, "text-anchor": anchor, class: "axis-label" }, svg,
        String(t));
    }
    arms.forEach((arm, i) => {
      const row = top + i * rowH;
      const cy = wide ? row + rowH / 2 : row + 28;
      const tip = el("g", {}, svg);
      el("title", {}, tip,
        `${names[i]}: mean ${fmt(arm.mean)}, 95% CI ${fmt(arm.ci_low)}–${fmt(arm.ci_high)}, ` +
        `${arm.pulls} pulls, confidence ${arm.confidence}` +
        (arm.underexplored
          ? "; under-explored: fewer pulls than min_pulls, always included while the inventory fits"
          : ""));
      if (wide) {
        const label = fit(svg, "bar-label", names[i], left - 12);
        el("text", { x: left - 10, y: cy + 4, "text-anchor": "end", class: "bar-label" }, tip, label);
        el("text", { x: width - right + 10, y: cy + 4, class: "bar-note" }, tip, notes[i]);
      } else {
        const noteLen = measure(svg, "bar-note", [notes[i]])[0];
        const label = fit(svg, "bar-label", names[i], width - 16 - noteLen - 10);
        el("text", { x: left, y: row + 13, class: "bar-label" }, tip, label);
        el("text", { x: width - 8, y: row + 13, "text-anchor": "end", class: "bar-note" }, tip,
          notes[i]);
      }
      if (finite(arm.ci_low) && finite(arm.ci_high)) {
        el("line", { x1: x(arm.ci_low), x2: x(arm.ci_high), y1: cy, y2: cy, class: "ci" }, tip);
      }
      if (finite(arm.mean))
        el("circle", { cx: x(arm.mean), cy, r: 5, class: arm.underexplored ? "mean mean-under" : "mean" }, tip);
    });
  }

  /* Line chart of several series over time; series = [{name, cls, points: [[t, y], ...]}]. */
  function lines(container, series, opts) {
    const width = widthOf(container, 480);
    const height = opts.height || 220;
    const svg = frame(container, width, height, opts.label);
    const all = series.flatMap((s) => s.points).filter((p) => finite(p[0]) && finite(p[1]));
    if (!all.length) return false;
    let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
    if (x1 === x0) x1 = x0 + 1;
    const [lo, hi] = opts.yRange || [Math.min(0, ...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
    const ticks = niceTicks(lo, hi > lo ? hi : lo + 1, height >= 180 ? 5 : 3);
    const [y0, y1] = [ticks[0], ticks[ticks.length - 1]];
    const labels = ticks.map(opts.yFormat || shortNumber);
    const pad = {
      l: Math.ceil(Math.max(...measure(svg, "axis-label", labels))) + 10,
      r: 8,
      t: 8,
      b: 24,
    };
    const X = (v) => pad.l + ((v - x0) / (x1 - x0)) * (width - pad.l - pad.r);
    const Y = (v) => height - pad.b - ((v - y0) / (y1 - y0)) * (height - pad.t - pad.b);
    ticks.forEach((v, i) => {
      el("line", { x1: pad.l, x2: width - pad.r, y1: Y(v), y2: Y(v), class: "axis" }, svg);
      el("text", { x: pad.l - 6, y: Y(v) + 4, "text-anchor": "end", class: "axis-label" }, svg,
        labels[i]);
    });
    const room = (width - pad.l - pad.r) / 2 - 6;
    if (opts.xStart) {
      el("text", { x: pad.l, y: height - 6, class: "axis-label" }, svg,
        fit(svg, "axis-label", opts.xStart, room));
    }
    if (opts.xEnd) {
      el("text", { x: width - pad.r, y: height - 6, "text-anchor": "end", class: "axis-label" },
        svg, fit(svg, "axis-label", opts.xEnd, room));
    }
    for (const s of series) {
      const pts = s.points.filter((p) => finite(p[0]) && finite(p[1]));
      if (!pts.length) continue;
      if (s.band) {
        const up = pts.map((p) => [p[0], clampTo(p[2], y0, y1)]);
        const down = pts.map((p) => [p[0], clampTo(p[3], y0, y1)]).reverse();
        const d = [...up, ...down].map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
        el("path", { d: d.join(" ") + " Z", class: s.band }, svg);
      }
      const d = pts.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
      el("path", { d: d.join(" "), class: s.cls }, svg);
      const last = pts[pts.length - 1];
      el("circle", { cx: X(last[0]), cy: Y(last[1]), r: 3, class: s.cls.replace("line", "dot") }, svg);
    }
    return true;
  }

  function clampTo(v, lo, hi) {
    return finite(v) ? Math.max(lo, Math.min(hi, v)) : lo;
  }

  /* Names that tell tiles apart in the room a tile has: each arm's shortest ending, in whole
     `:`- or `/`-separated parts, that no other arm shown ends with ("…" where its start was cut:
     `tool:exec:Bash` is `…Bash`, `file:a/README.md` and `file:b/README.md` are `…a/README.md`
     and `…b/README.md`); a long one loses its middle, never its end. The tooltip has it all. */
  const LABEL_MAX = 30;
  function distinctLabels(ids) {
    const endsWithPart = (other, tail) =>
      other === tail || (other.endsWith(tail) && /[:/]/.test(other[other.length - tail.length - 1]));
    return ids.map((id, i) => {
      const parts = id.split(/(?<=[:/])/);
      let label = id;
      for (let n = 1; n < parts.length; n++) {
        const tail = parts.slice(-n).join("");
        if (ids.every((other, j) => j === i || !endsWithPart(other, tail))) {
          label = "…" + tail;
          break;
        }
      }
      if (label.length > LABEL_MAX) {
        const keepEnd = Math.ceil((LABEL_MAX - 1) * 0.65);
        label = label.slice(0, LABEL_MAX - 1 - keepEnd) + "…" + label.slice(-keepEnd);
      }
      return label;
    });
  }

  /* One small chart per arm: posterior mean after each observation that updated it, with a
     band of two standard deviations of the Beta posterior (it narrows as the arm converges). */
  function convergence(container, series) {
    const tiles = [];
    const labels = distinctLabels(series.map((s) => s.id));
    series.forEach((s, i) => {
      const tile = document.createElement("figure");
      tile.className = "conv-tile";
      tile.dataset.arm = s.id;
      const cap = document.createElement("figcaption");
      const name = document.createElement("span");
      name.className = "conv-name";
      name.textContent = labels[i];
      name.title = s.id;
      const value = document.createElement("span");
      value.className = "conv-value";
      const last = s.points[s.points.length - 1];
      value.textContent = last ? `${fmt(last.mean)} · ${last.obs_index} obs` : "";
      cap.append(name, value);
      const chart = document.createElement("div");
      chart.className = "chart conv-chart";
      tile.append(cap, chart);
      tiles.push([tile, chart, s]);
    });
    container.replaceChildren(...tiles.map((t) => t[0]));
    for (const [, chart, s] of tiles) {
      const pts = s.points.map((p) => {
        const a = p.alpha;
        const b = p.beta;
        const sd = finite(a) && finite(b) ? Math.sqrt((a * b) / ((a + b) ** 2 * (a + b + 1))) : 0;
        return [p.obs_index, p.mean, p.mean + 2 * sd, p.mean - 2 * sd];
      });
      const first = s.points[0];
      const lastPt = s.points[s.points.length - 1];
      lines(chart, [{ name: s.id, cls: "line-conv", band: "conv-band", points: pts }], {
        label: `posterior mean of ${s.id} after each observation`,
        height: 120,
        yRange: [0, 1], // every tile on one scale, so arms compare at a glance
        yFormat: (v) => String(Number(v.toFixed(2))),
        xStart: first ? `obs ${first.obs_index}` : "",
        xEnd: lastPt ? `obs ${lastPt.obs_index}` : "",
      });
    }
  }

  /* The session trend under the score: running total, oldest first. */
  function sparkline(container, points) {
    const width = widthOf(container, 320);
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

  global.PlauditCharts = {
    intervals,
    lines,
    convergence,
    distinctLabels,
    sparkline,
    shortNumber,
    niceTicks,
  };
})(window);

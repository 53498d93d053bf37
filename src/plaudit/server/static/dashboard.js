/* plaudit dashboard: polls the HTTP API and renders each card; a missing endpoint or an empty
   answer shows the card's empty state (which says what fills it) instead of breaking the page.
   Text is always set with textContent, never parsed as HTML. Charts are drawn at their card's
   width and redrawn from the last answers when the window is resized. */
"use strict";

(function () {
  const C = window.PlauditCharts;
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  /* The score, transactions and log head are polled every 5 s, as seed 003's widget is;
     `?poll=SECONDS` (1 to 3600) sets another interval. */
  const POLL_DEFAULT_S = 5;
  const pollParam = Number(params.get("poll"));
  const POLL_S =
    Number.isFinite(pollParam) && pollParam >= 1 && pollParam <= 3600 ? pollParam : POLL_DEFAULT_S;
  const FAST_MS = POLL_S * 1000; // score, transactions, log head
  const SLOW_MIN_MS = Math.max(5000, FAST_MS); // posteriors, savings, gates, verify: when the log grew...
  const SLOW_MAX_MS = Math.max(30000, FAST_MS); // ...or at least this often
  let context = params.get("context") || "";

  let lastHead = null;
  let lastSlow = 0;
  let lastTotal = null;
  let seenTx = new Set();
  let failures = 0;
  let backendName = "";
  const lastData = {}; // the last answer each chart was drawn from, for redraws on resize

  /* GET a JSON endpoint; null when it is missing, failing or not JSON. */
  async function get(path) {
    try {
      const res = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!res.ok) return null;
      return await res.json();
    } catch (_err) {
      return null;
    }
  }

  function num(v) {
    return typeof v === "number" && Number.isFinite(v) ? v : null;
  }

  function signed(v, digits) {
    if (num(v) === null) return "—";
    const s = Math.abs(v).toLocaleString(undefined, {
      maximumFractionDigits: digits === undefined ? 2 : digits,
    });
    return (v > 0 ? "+" : v < 0 ? "−" : "") + s;
  }

  function plain(v, digits) {
    if (num(v) === null) return "—";
    return v.toLocaleString(undefined, { maximumFractionDigits: digits === undefined ? 1 : digits });
  }

  function timeOf(ms) {
    if (num(ms) === null) return "";
    const d = new Date(ms);
    const today = new Date();
    return d.toDateString() === today.toDateString()
      ? d.toLocaleTimeString()
      : d.toLocaleString();
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function show(id, visible) {
    $(id).hidden = !visible;
  }

  // -- score widget -------------------------------------------------------------------------
  function renderScore(s) {
    const widget = document.querySelector(".rl-score-widget");
    const total = $("score-total");
    lastData.score = s;
    const empty = !s || num(s.total_score) === null || num(s.transactions) === 0;
    show("score-empty", empty);
    if (!s || num(s.total_score) === null) {
      widget.dataset.state = "empty";
      total.textContent = "—";
      total.className = "total-score";
      $("score-rewards").textContent = "— rewards";
      $("score-penalties").textContent = "— penalties";
      $("score-efficiency").textContent = "— learning efficiency";
      $("score-trend").textContent = "";
      $("score-trend").className = "trend";
      $("score-meta").textContent = "";
      C.sparkline($("score-spark"), []);
      return;
    }
    widget.dataset.state = "live";
    total.textContent = signed(s.total_score);
    total.className = "total-score" + (s.total_score > 0 ? " pos" : s.total_score < 0 ? " neg" : "");
    if (lastTotal !== null && lastTotal !== s.total_score) {
      total.classList.remove("flash");
      void total.offsetWidth; // restart the animation
      total.classList.add("flash");
    }
    lastTotal = s.total_score;
    $("score-rewards").textContent = `${signed(Math.abs(s.rewards_total ?? 0))} rewards`;
    $("score-penalties").textContent = `${signed(-Math.abs(s.penalties_total ?? 0))} penalties`;
    $("score-efficiency").textContent =
      num(s.learning_efficiency) === null
        ? "— learning efficiency"
        : `${plain(s.learning_efficiency)}% learning efficiency`;
    const session = num(s.session_score);
    const trend = $("score-trend");
    if (session === null) {
      trend.textContent = "no session yet";
      trend.className = "trend";
    } else {
      const arrow = session > 0 ? "↗" : session < 0 ? "↘" : "→";
      trend.textContent = `${arrow} ${signed(session)} this session`;
      trend.className = "trend" + (session > 0 ? " up" : session < 0 ? " down" : "");
    }
    const pts = Array.isArray(s.trend) ? s.trend.map((p) => [p.ts_ms, p.total]) : [];
    C.sparkline($("score-spark"), pts);
    const bits = [];
    if (num(s.transactions) !== null) bits.push(`${plain(s.transactions, 0)} transactions`);
    if (num(s.lifetime_score) !== null) bits.push(`lifetime ${signed(s.lifetime_score)}`);
    if (s.session_id) bits.push(`session ${s.session_id}`);
    if (typeof s.verified === "boolean") bits.push(s.verified ? "ledger verified ✓" : "ledger NOT verified");
    $("score-meta").textContent = bits.join(" · ");
  }

  // -- transactions -------------------------------------------------------------------------
  function renderTransactions(data) {
    const body = $("tx-body");
    const rows = data && Array.isArray(data.transactions) ? data.transactions : [];
    body.replaceChildren();
    show("tx-empty", rows.length === 0);
    show("tx-table", rows.length > 0);
    const fresh = new Set();
    for (const t of rows) {
      const tr = document.createElement("tr");
      const key = String(t.id);
      fresh.add(key);
      if (seenTx.size && !seenTx.has(key)) tr.className = "new";
      cell(tr, timeOf(t.ts_ms) || String(t.timestamp ?? ""), "time");
      cell(tr, String(t.type ?? ""), "kind");
      cell(tr, String(t.category ?? ""), "mono category");
      const pts = num(t.points);
      cell(tr, signed(pts), "num points " + (pts > 0 ? "pos" : pts < 0 ? "neg" : ""));
      const action = cell(tr, String(t.action ?? ""), "action");
      action.title = String(t.action ?? "");
      cell(tr, String(t.source ?? ""), "muted source");
      const running = cell(tr, signed(num(t.running_total)), "num total");
      running.dataset.label = "total ";
      const v = cell(tr, t.verified === true ? "✓ source" : "", "num verified");
      v.title = t.verified === true ? "cross-checked against its source record" : "no source record to cross-check";
      body.appendChild(tr);
    }
    seenTx = fresh;
  }

  // -- log verification ---------------------------------------------------------------------
  function renderVerify(v) {
    const badge = $("verify-badge");
    const reason = $("verify-reason");
    if (!v || typeof v.ok !== "boolean") {
      badge.textContent = "unavailable";
      badge.className = "badge badge-none";
      for (const id of ["verify-length", "verify-checked", "verify-head", "verify-when"]) {
        $(id).textContent = "—";
      }
      reason.hidden = true;
      return;
    }
    badge.textContent = v.ok ? "INTACT" : "FAILED";
    badge.className = "badge " + (v.ok ? "badge-ok" : "badge-bad");
    $("verify-length").textContent = plain(v.length, 0);
    $("verify-checked").textContent = plain(v.checked, 0);
    const head = String(v.head ?? "");
    const [len, hash] = head.split(":");
    $("verify-head").textContent = hash ? `${len}:${hash.slice(0, 16)}…` : head || "—";
    $("verify-head").title = head;
    $("verify-when").textContent = new Date().toLocaleTimeString();
    if (!v.ok) {
      reason.textContent = `first bad position ${v.first_bad ?? "?"}: ${v.reason ?? "unknown"}`;
      reason.hidden = false;
    } else {
      reason.hidden = true;
    }
  }

  // -- router gates -------------------------------------------------------------------------
  function renderGates(g) {
    const body = $("gates-body");
    const overall = $("gates-overall");
    const gates = g && Array.isArray(g.gates) ? g.gates : [];
    body.replaceChildren();
    // The gates are computed on an empty log too (all failing): say what fills them as well.
    const decisions = gates.find((x) => x && x.name === "min_decisions");
    show("gates-empty", gates.length === 0 || (decisions && num(decisions.actual) === 0));
    show("gates-table", gates.length > 0);
    if (!gates.length) {
      overall.textContent = "no decisions yet";
      overall.className = "badge badge-none";
      return;
    }
    overall.textContent = g.passed ? "PASS" : "FAIL";
    overall.className = "badge " + (g.passed ? "badge-ok" : "badge-bad");
    for (const gate of gates) {
      const tr = document.createElement("tr");
      cell(tr, String(gate.name ?? ""), "gate-name");
      cell(tr, plain(num(gate.actual), 3), "num");
      cell(tr, `${gate.op ?? ""} ${plain(num(gate.threshold), 3)}`, "num muted");
      const td = cell(tr, "", "num");
      const pill = document.createElement("span");
      pill.className = "pill " + (gate.passed ? "pill-pass" : "pill-fail");
      pill.textContent = gate.passed ? "PASS" : "FAIL";
      td.appendChild(pill);
      body.appendChild(tr);
    }
  }

  // -- bandit -------------------------------------------------------------------------------
  function renderPosteriors(p) {
    lastData.posteriors = p;
    const arms = p && Array.isArray(p.arms) ? p.arms.slice() : [];
    const chart = $("arms-chart");
    if (!arms.length) {
      chart.replaceChildren();
      show("arms-empty", true);
      return;
    }
    show("arms-empty", false);
    arms.sort((a, b) => (num(b.mean) ?? 0) - (num(a.mean) ?? 0));
    C.intervals(chart, arms.slice(0, 40));
  }

  function renderConvergence(h) {
    lastData.history = h;
    const chart = $("conv-chart");
    const arms = h && h.arms && typeof h.arms === "object" ? h.arms : {};
    const series = Object.entries(arms)
      .map(([id, points]) => ({ id, points: Array.isArray(points) ? points : [] }))
      .filter((s) => s.points.length > 0);
    const final = (s) => num(s.points[s.points.length - 1].mean) ?? 0;
    series.sort((a, b) => final(b) - final(a) || a.id.localeCompare(b.id));
    show("conv-empty", series.length === 0);
    if (!series.length) {
      chart.replaceChildren();
      return;
    }
    C.convergence(chart, series.slice(0, 24));
  }

  function renderSavings(s) {
    lastData.savings = s;
    const chart = $("savings-chart");
    const history = s && Array.isArray(s.history) ? s.history : [];
    // The headline is the saving of prompt tokens against what each run would have sent
    // without the bandit (its counterfactual: the full inventory when it fits the budget),
    // the figure `plaudit savings` prints first; the chart draws its two sides.
    const pct = s ? num(s.prompt_savings_percent) : null;
    $("savings-percent").textContent = pct === null ? "—" : `${plain(pct)}% saved`;
    const lo = s ? num(s.prompt_ci_low) : null;
    const hi = s ? num(s.prompt_ci_high) : null;
    const against = s && s.counterfactual ? `against ${s.counterfactual}` : "";
    $("savings-what").textContent =
      pct === null ? "" : `of prompt tokens in ${plain(s.runs ?? 0, 0)} runs, ${against}`;
    $("savings-ci").textContent = lo !== null && hi !== null ? `95% CI ${plain(lo)}% to ${plain(hi)}%` : "";
    const drawn =
      history.length > 0 &&
      C.lines(
        chart,
        [
          {
            name: "without the bandit",
            cls: "line-baseline",
            points: history.map((h) => [h.ts_ms, h.counterfactual_avg_tokens]),
          },
          { name: "sent", cls: "line-selected", points: history.map((h) => [h.ts_ms, h.prompt_avg_tokens]) },
        ],
        {
          label: "average prompt tokens per run over time: without the bandit vs sent",
          xStart: timeOf(history[0].ts_ms),
          xEnd: timeOf(history[history.length - 1].ts_ms),
        },
      );
    if (!drawn) chart.replaceChildren();
    show("savings-empty", !drawn);
    show("savings-legend", drawn);
  }

  // -- polling ------------------------------------------------------------------------------
  function setConn(ok) {
    const conn = $("conn");
    conn.textContent = ok ? "live" : "server unreachable";
    conn.title = `connection to the server; the score is polled every ${POLL_S} s (?poll=SECONDS)`;
    conn.dataset.pollSeconds = String(POLL_S);
    conn.className = "conn " + (ok ? "conn-ok" : "conn-bad");
    if (ok) $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  }

  async function fast() {
    const [score, tx, head] = await Promise.all([
      get("/v1/ledger/score"),
      get("/v1/ledger/transactions?limit=15"),
      get("/v1/log/head"),
    ]);
    renderScore(score);
    renderTransactions(tx);
    if (head) $("backend").textContent = backendName + `${plain(head.length, 0)} events`;
    return head;
  }

  function renderContexts(data) {
    const list = data && Array.isArray(data.contexts) ? data.contexts.map(String) : [];
    const select = $("context-select");
    $("context-label").hidden = list.length === 0 && !context;
    const wanted = ["", ...list];
    if (context && !wanted.includes(context)) wanted.push(context);
    const have = Array.from(select.options).map((o) => o.value);
    if (have.join("\u0000") !== wanted.join("\u0000")) {
      select.replaceChildren();
      for (const value of wanted) {
        const opt = document.createElement("option");
        opt.value = value;
        opt.textContent = value || "all (global)";
        select.appendChild(opt);
      }
    }
    select.value = context;
  }

  async function posteriors() {
    const q = context ? `context=${encodeURIComponent(context)}` : "";
    const [post, hist] = await Promise.all([
      get(`/v1/bandit/posteriors?${q}`),
      get(`/v1/bandit/history?points=60&${q}`),
    ]);
    renderPosteriors(post);
    renderConvergence(hist);
  }

  async function slow() {
    const [, ctx, sav, gates, ver] = await Promise.all([
      posteriors(),
      get("/v1/bandit/contexts"),
      get("/v1/bandit/savings"),
      get("/v1/signals/gates"),
      get("/v1/log/verify"),
    ]);
    renderContexts(ctx);
    renderSavings(sav);
    renderGates(gates);
    renderVerify(ver);
  }

  async function tick() {
    let head = null;
    try {
      head = await fast();
      const now = Date.now();
      const grew = head && head.digest !== lastHead;
      if ((grew && now - lastSlow >= SLOW_MIN_MS) || now - lastSlow >= SLOW_MAX_MS || !lastSlow) {
        lastSlow = now;
        if (head) lastHead = head.digest;
        await slow();
      }
    } finally {
      failures = head ? 0 : failures + 1;
      setConn(failures === 0);
      setTimeout(tick, FAST_MS);
    }
  }

  function onContextChange() {
    context = $("context-select").value;
    const url = new URL(location.href);
    if (context) url.searchParams.set("context", context);
    else url.searchParams.delete("context");
    history.replaceState(null, "", url);
    posteriors();
  }

  let drawnWidth = window.innerWidth;
  let resizeTimer = null;
  function onResize() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (window.innerWidth === drawnWidth) return;
      drawnWidth = window.innerWidth;
      if ("posteriors" in lastData) renderPosteriors(lastData.posteriors);
      if ("history" in lastData) renderConvergence(lastData.history);
      if ("savings" in lastData) renderSavings(lastData.savings);
      if ("score" in lastData) renderScore(lastData.score);
    }, 150);
  }

  async function start() {
    $("context-select").addEventListener("change", onContextChange);
    window.addEventListener("resize", onResize);
    const health = await get("/v1/health");
    if (health) backendName = `${health.backend} · `;
    tick();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

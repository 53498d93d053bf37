"""The HTTP benchmarks' Markdown tables (medians per tree), ready to paste into docs.

With more than one tree, the reference is the second one (the first tree added with
`--checkout`/`--python`); ratios are tree / reference, so above 1 means costlier.
"""

from __future__ import annotations

from typing import Any


def _ratio(value: float, ref: float | None) -> str:
    if ref is None or not ref or value != value:
        return ""
    return f"{value / ref:.2f}x"


def _ref(labels: list[str]) -> str | None:
    return labels[1] if len(labels) > 1 else None


def load_tables(summary: list[dict[str, Any]], labels: list[str], durability: str) -> str:
    ref = _ref(labels)
    cpu = {(s["workload"], s["rate"], s["backend"], s["tree"]): s for s in summary}
    lines = [
        "| workload | backend | offered req/s | tree | runs | requests | errors | achieved "
        "req/s | p50 ms | p99 ms | max ms | p99 from send ms | server CPU ms/request | vs "
        f"{ref or 'ref'} | server CPU-s per run | client CPU ms/request |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        other = cpu.get((s["workload"], s["rate"], s["backend"], ref or ""))
        vs = _ratio(s["server_cpu_ms_per_request"], other and other["server_cpu_ms_per_request"])
        backend = f"sqlite ({durability})" if s["backend"] == "sqlite" else s["backend"]
        backend += f", {s['workers']} workers" if s["workers"] > 1 else ""
        lines.append(
            f"| {s['workload']} | {backend} | {s['rate']:g} | {s['tree']} | {s['runs']} "
            f"| {s['requests']} | {s['errors']} | {s['achieved_rate']} | {s['p50_ms']} "
            f"| {s['p99_ms']} | {s['max_ms']} | {s['p99_send_ms']} "
            f"| {s['server_cpu_ms_per_request']} "
            f"| {vs} "
            f"| {s['server_cpu_s']} | {s['client_cpu_ms_per_request']} |"
        )
    if any(len(s["endpoints"]) > 2 for s in summary):
        lines += ["", _endpoint_table(summary, labels)]
    return "\n".join(lines)


def _endpoint_table(summary: list[dict[str, Any]], labels: list[str]) -> str:
    """Per endpoint of the mixed workload: p50 / p99 (ms) and errors, a column per tree."""
    head = "| workload | backend | offered req/s | endpoint | " + " | ".join(
        f"{t} p50 / p99 ms (errors)" for t in labels
    )
    lines = [head + " |", "|---|---|---|---|" + "---|" * len(labels)]
    groups: dict[tuple[str, float, str], dict[str, dict[str, Any]]] = {}
    for s in summary:
        groups.setdefault((s["workload"], s["rate"], s["backend"]), {})[s["tree"]] = s
    for (workload, rate, backend), by_tree in groups.items():
        names = sorted({n for s in by_tree.values() for n in s["endpoints"]})
        for name in names:
            cells = []
            for t in labels:
                e = by_tree.get(t, {}).get("endpoints", {}).get(name)
                cells.append("" if e is None else f"{e['p50_ms']} / {e['p99_ms']} ({e['errors']})")
            lines.append(
                f"| {workload} | {backend} | {rate:g} | {name} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def target_lines(summary: list[dict[str, Any]], labels: list[str]) -> str:
    """Per workload, backend and tree: the highest rate whose median p99 kept its limit with
    no errors."""
    out = []
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for s in summary:
        groups.setdefault((s["workload"], s["backend"], s["tree"]), []).append(s)
    for (workload, backend, tree), rows in sorted(groups.items(), key=lambda kv: kv[0]):
        ok = [s["rate"] for s in rows if s["errors"] == 0 and s["p99_ms"] <= s["limit_ms"]]
        tried = ", ".join(
            f"{s['rate']:g}/s p99 {s['p99_ms']} ms{'' if s['errors'] == 0 else ' with errors'}"
            for s in sorted(rows, key=lambda s: s["rate"])
        )
        limit = rows[0]["limit_ms"]
        best = f"{max(ok):g} req/s" if ok else "none of the rates tried"
        out.append(
            f"- {workload}, {backend}, {tree}: highest rate with p99 <= {limit:g} ms and no "
            f"errors: {best} ({tried})"
        )
    return "\n" + "\n".join(out)


def single_tables(
    summary: list[dict[str, Any]], labels: list[str], names: dict[str, str], durability: str
) -> str:
    """One row per endpoint, backend and seeded log: CPU per request per tree (median and
    range over runs), the ratio to the reference, statements per request and wall time (median)
    per tree. `log events` is the log's length when the endpoint's measured requests began."""
    ref = _ref(labels)
    rows: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = {}
    for s in summary:
        rows.setdefault((s["endpoint"], s["backend"], s["seed"]), {})[s["tree"]] = s
    counted = any("statements" in s for s in summary)
    head = "| endpoint | backend | log events | " + " | ".join(
        f"{t} CPU ms/request" for t in labels
    )
    sep = "|---|---|---|" + "---|" * len(labels)
    if ref:
        head += f" | vs {ref}"
        sep += "---|"
    if counted:
        head += " | " + " | ".join(f"{t} statements/request" for t in labels)
        sep += "---|" * len(labels)
    head += " | " + " | ".join(f"{t} wall ms" for t in labels)
    sep += "---|" * len(labels)
    lines = [head + " |", sep]
    for (endpoint, backend, _), by_tree in sorted(
        rows.items(), key=lambda kv: (kv[0][1], kv[0][2])
    ):
        b = f"sqlite ({durability})" if backend == "sqlite" else backend
        first = next(iter(by_tree.values()))
        line = f"| {names.get(endpoint, endpoint)} | {b} | {first['log_length']} | "
        line += " | ".join(_cpu_cell(by_tree.get(t)) for t in labels)
        if ref:
            mine, theirs = by_tree.get(labels[0]), by_tree.get(ref)
            line += " | " + (_ratio(mine["cpu_ms"], theirs["cpu_ms"]) if mine and theirs else "")
        if counted:
            line += " | " + " | ".join(
                str(by_tree.get(t, {}).get("statements", "")) for t in labels
            )
        line += " | " + " | ".join(str(by_tree.get(t, {}).get("wall_ms", "")) for t in labels)
        lines.append(line + " |")
    idle = {(s["backend"], s["tree"]): s["idle_cpu_ms_per_s"] for s in summary}
    notes = "; ".join(f"{b} {t} {v}" for (b, t), v in idle.items())
    return "\n".join(lines) + f"\n\nidle server after seeding, CPU-ms/s: {notes}"


def _cpu_cell(s: dict[str, Any] | None) -> str:
    if s is None:
        return ""
    runs = s["cpu_ms_runs"]
    return f"{s['cpu_ms']} ({min(runs)}-{max(runs)})" if len(runs) > 1 else f"{s['cpu_ms']}"

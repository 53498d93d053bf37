"""Token savings: the headline, each run's prompt against what it would have sent without the
bandit (its counterfactual), and the seed's comparison of selected with baseline (full-prompt)
runs, each with a confidence interval, plus duration and error rate by kind of run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_POINTS = 200
_Z95 = 1.959963984540054


def _thin(points: list[dict[str, Any]], limit: int = MAX_POINTS) -> list[dict[str, Any]]:
    """At most `limit` evenly spaced points, always keeping the last one."""
    if len(points) <= limit:
        return points
    idx = np.linspace(0, len(points) - 1, limit).round().astype(int)
    return [points[i] for i in sorted(set(idx.tolist()))]


def ratio_ci(
    base: np.ndarray, sel: np.ndarray, z: float = _Z95
) -> tuple[float | None, float | None, float | None]:
    """savings% = (1 - mean(sel) / mean(base)) * 100 and its delta-method interval.

    Var(ms/mb) ~ r^2 * (vs / (ns ms^2) + vb / (nb mb^2)) for independent groups; the interval
    needs two runs in each group and a positive baseline mean.
    """
    if base.size == 0 or sel.size == 0:
        return None, None, None
    mb, ms = float(base.mean()), float(sel.mean())
    if mb <= 0:
        return None, None, None
    r = ms / mb
    pct = (1.0 - r) * 100.0
    if base.size < 2 or sel.size < 2:
        return pct, None, None
    var = (
        r
        * r
        * (
            (float(sel.var(ddof=1)) / (sel.size * ms * ms) if ms > 0 else 0.0)
            + float(base.var(ddof=1)) / (base.size * mb * mb)
        )
    )
    half = z * math.sqrt(var) * 100.0
    return pct, pct - half, pct + half


def sum_ratio_ci(
    used: np.ndarray, base: np.ndarray, z: float = _Z95
) -> tuple[float | None, float | None, float | None]:
    """savings% = (1 - sum(used) / sum(base)) * 100 over paired runs, with the delta-method
    interval of a ratio of sums: Var(R) ~ Var(used - R base) / (n mean(base)^2)."""
    if used.size == 0 or float(base.sum()) <= 0:
        return None, None, None
    r = float(used.sum() / base.sum())
    pct = (1.0 - r) * 100.0
    if used.size < 2:
        return pct, None, None
    resid = used - r * base
    se = math.sqrt(float(resid.var(ddof=1)) / used.size) / float(base.mean())
    return pct, pct - z * se * 100.0, pct + z * se * 100.0


def _avg(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def summarise(rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """`rows`: (seq, ts_ms, is_baseline, tokens, observed, duration_ms, error, prompt tokens,
    counterfactual tokens, inventory tokens, budget), in log order."""
    base_tok: list[float] = []
    sel_tok: list[float] = []
    dur: dict[bool, list[float]] = {True: [], False: []}
    err: dict[bool, list[int]] = {True: [], False: []}
    history: list[dict[str, Any]] = []
    sums = {True: 0.0, False: 0.0}
    counts = {True: 0, False: 0}
    sent_sum = counter_sum = 0.0
    used_p: list[float] = []
    counter: list[float] = []
    inventory: list[float] = []
    binding = False
    for i, row in enumerate(rows, 1):
        _seq, ts_ms, is_base, tokens, observed, duration, error = row[:7]
        used_p.append(float(row[7]))
        fits = int(row[9]) <= int(row[10])
        # A run whose inventory fits is measured against the full inventory, whatever its
        # row recorded (runs logged before the counterfactual was fixed recorded the arms
        # they chose, which made every fitting run's saving 0).
        counter.append(float(row[9]) if fits else float(row[8]))
        inventory.append(float(row[9]))
        sent_sum += used_p[-1]
        counter_sum += counter[-1]
        binding |= not fits
        b = bool(is_base)
        (base_tok if b else sel_tok).append(float(tokens))
        sums[b] += float(tokens)
        counts[b] += 1
        if observed:
            err[b].append(1 if error else 0)
            if duration is not None:
                dur[b].append(float(duration))
        history.append(
            {
                "ts_ms": int(ts_ms),
                "run": i,
                "baseline_avg_tokens": sums[True] / counts[True] if counts[True] else None,
                "selected_avg_tokens": sums[False] / counts[False] if counts[False] else None,
                # the headline's two sides, averaged over the runs so far
                "prompt_avg_tokens": sent_sum / i,
                "counterfactual_avg_tokens": counter_sum / i,
            }
        )
    pct, lo, hi = ratio_ci(np.asarray(base_tok), np.asarray(sel_tok))
    net, net_lo, net_hi = ratio_ci(np.asarray(base_tok), np.asarray(base_tok + sel_tok))
    prompt, p_lo, p_hi = sum_ratio_ci(np.asarray(used_p), np.asarray(counter))
    return {
        # the headline, first: what every surface shows
        "prompt_savings_percent": prompt,
        "prompt_ci_low": p_lo,
        "prompt_ci_high": p_hi,
        "counterfactual": "random-order fill up to the budget" if binding else "the full inventory",
        "runs": len(used_p),
        "inventory_savings_percent": sum_ratio_ci(np.asarray(used_p), np.asarray(inventory))[0],
        "token_savings_percent": pct,
        "ci_low": lo,
        "ci_high": hi,
        "ci_level": 0.95,
        "net_savings_percent": net,
        "net_ci_low": net_lo,
        "net_ci_high": net_hi,
        "baseline_runs": len(base_tok),
        "selected_runs": len(sel_tok),
        "baseline_avg_tokens": _avg(base_tok),
        "selected_avg_tokens": _avg(sel_tok),
        "baseline_avg_duration_ms": _avg(dur[True]),
        "selected_avg_duration_ms": _avg(dur[False]),
        "baseline_error_rate": _avg(err[True]),
        "selected_error_rate": _avg(err[False]),
        "baseline_observed": len(err[True]),
        "selected_observed": len(err[False]),
        "history": _thin(history),
    }

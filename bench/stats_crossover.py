"""Where `beta_sf_array`'s plain loop stops paying: the vectorised continued fraction against a
loop over `beta_cdf`, on posteriors like a selection's (successes and failures from a few to a
few hundred, bars of 0.005 to 0.2), at growing arm counts. `stats._SCALAR_TAILS` is set from
this table.

    .venv/bin/python bench/stats_crossover.py            # 5 interleaved rounds
    .venv/bin/python bench/stats_crossover.py --sizes 16,32,48,64,96 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from plaudit.bandit import stats


def inputs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.integers(2, 300, n).astype(np.float64)
    s = np.floor(obs * rng.uniform(0.0, 0.6, n))
    return rng.uniform(0.005, 0.2, n), 0.5 + s, 0.5 + obs - s


def timed(threshold: int, x: np.ndarray, a: np.ndarray, b: np.ndarray, reps: int) -> float:
    """CPU microseconds per call of `beta_sf_array` with the plain loop used up to
    `threshold` arms."""
    saved = stats._SCALAR_TAILS
    stats._SCALAR_TAILS = threshold
    try:
        c0 = time.process_time()
        for _ in range(reps):
            stats.beta_sf_array(x, a, b)
        return (time.process_time() - c0) / reps * 1e6
    finally:
        stats._SCALAR_TAILS = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,24,32,48,64,96,128")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args(argv)
    sizes = [int(v) for v in args.sizes.split(",")]
    load0 = os.getloadavg()[0]
    loop: dict[int, list[float]] = {n: [] for n in sizes}
    vec: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            x, a, b = inputs(n, r)
            loop[n].append(timed(10**9, x, a, b, args.reps))
            vec[n].append(timed(-1, x, a, b, args.reps))
    print("| arms | loop (CPU µs) | vectorised (CPU µs) | loop / vectorised |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        lo, ve = statistics.median(loop[n]), statistics.median(vec[n])
        print(f"| {n} | {lo:,.0f} | {ve:,.0f} | {lo / ve:.2f} |")
    print(
        f"\nmedians of {args.rounds} interleaved rounds of {args.reps} calls; load average "
        f"{load0:.1f} before, {os.getloadavg()[0]:.1f} after; threshold now "
        f"{stats._SCALAR_TAILS}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

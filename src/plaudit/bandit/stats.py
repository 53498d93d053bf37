"""Beta-posterior statistics without scipy: the regularised incomplete beta function and its
inverse, so credible intervals are exact Beta quantiles at any level (not a normal
approximation, which leaves [0, 1] for small counts)."""

from __future__ import annotations

import math

import numpy as np

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for I_x(a, b) by the modified Lentz method.

    A selection evaluates this for the few arms the bounds of `tail_at_least` leave undecided
    and the few its search weighs (`beta_sf_array` below `_SCALAR_TAILS` arms), in plain
    Python: the loop compares with `tiny` directly instead of calling abs(), which
    selects the same values (so the result is bit for bit the same) at a fraction of the
    cost."""
    tiny, neg_tiny, eps, neg_eps = _TINY, -_TINY, _EPS, -_EPS
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if d > tiny or d < neg_tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if d > tiny or d < neg_tiny else tiny)
        c = 1.0 + aa / c
        if not (c > tiny or c < neg_tiny):
            c = tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if d > tiny or d < neg_tiny else tiny)
        c = 1.0 + aa / c
        if not (c > tiny or c < neg_tiny):
            c = tiny
        delta = d * c
        h *= delta
        if neg_eps < delta - 1.0 < eps:
            break
    return h


def _log_front(a: float, b: float, x: float) -> float:
    return (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(X <= x) for X ~ Beta(a, b), a, b > 0."""
    if a <= 0 or b <= 0:
        raise ValueError("Beta parameters must be positive")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(_log_front(a, b, x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def beta_ppf(q: float, a: float, b: float) -> float:
    """The q-quantile of Beta(a, b): bisection to a relative tolerance, which is slower than
    Newton's method but cannot fail to converge, even for tiny quantiles."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be in [0, 1]")
    if q == 0.0:
        return 0.0
    if q == 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    x = a / (a + b)
    for _ in range(1100):
        f = beta_cdf(x, a, b)
        if f < q:
            lo = x
        else:
            hi = x
        x = 0.5 * (lo + hi)
        if hi - lo <= 1e-14 * hi or hi - lo < 1e-300:
            break
    return min(max(x, 0.0), 1.0)


def credible_interval(a: float, b: float, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed interval; always inside [0, 1] because it is made of Beta quantiles."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    tail = (1.0 - level) / 2.0
    return beta_ppf(tail, a, b), beta_ppf(1.0 - tail, a, b)


def mean(a: float, b: float) -> float:
    return a / (a + b)


def variance(a: float, b: float) -> float:
    s = a + b
    return a * b / (s * s * (s + 1.0))


def confidence_tier(pulls: int) -> str:
    """The seed's tiers: 0 none, 1-4 low, 5-19 medium, 20-49 high, 50+ very high."""
    if pulls <= 0:
        return "none"
    if pulls < 5:
        return "low"
    if pulls < 20:
        return "medium"
    if pulls < 50:
        return "high"
    return "very high"


#: Lanczos (g = 7) coefficients: log-gamma to about 1e-15 for any positive argument.
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def lgamma_array(x: np.ndarray) -> np.ndarray:
    """log Gamma(x) for x > 0, elementwise (Lanczos), so no Python loop runs per arm."""
    x = np.asarray(x, dtype=np.float64)
    small = x < 0.5
    z = np.where(small, x + 1.0, x) - 1.0
    acc = np.full(z.shape, _LANCZOS[0])
    for i in range(1, len(_LANCZOS)):
        acc = acc + _LANCZOS[i] / (z + i)
    t = z + 7.5
    out = _HALF_LOG_2PI + (z + 0.5) * np.log(t) - t + np.log(acc)
    return np.where(small, out - np.log(x), out)


#: Below this many arms a plain loop over `beta_cdf` beats the vectorised fraction, whose
#: cost is its numpy calls per step whatever the arms (`bench/stats_crossover.py`).
_SCALAR_TAILS = 96


def beta_sf_array(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(X > x) for X ~ Beta(a, b), elementwise: the continued fraction of `beta_cdf`,
    vectorised, with the arms that have converged dropped from each further step (a plain
    loop for a few arms)."""
    x, a, b = np.broadcast_arrays(
        np.asarray(x, dtype=np.float64), np.asarray(a, np.float64), np.asarray(b, np.float64)
    )
    out = np.where(x <= 0.0, 1.0, 0.0)
    inner = np.flatnonzero((x > 0.0) & (x < 1.0))
    if inner.size == 0:
        return out
    xi, ai, bi = x.ravel()[inner], a.ravel()[inner], b.ravel()[inner]
    flat = out.ravel()
    if inner.size <= _SCALAR_TAILS:
        flat[inner] = [
            min(max(1.0 - beta_cdf(xv, av, bv), 0.0), 1.0)
            for xv, av, bv in zip(xi.tolist(), ai.tolist(), bi.tolist(), strict=True)
        ]
        return flat.reshape(out.shape)
    flip = xi >= (ai + 1.0) / (ai + bi + 2.0)
    # Evaluate the fraction where it converges fast: I_x(a,b) or 1 - I_{1-x}(b,a).
    xx = np.where(flip, 1.0 - xi, xi)
    aa = np.where(flip, bi, ai)
    bb = np.where(flip, ai, bi)
    log_front = (
        lgamma_array(aa + bb)
        - lgamma_array(aa)
        - lgamma_array(bb)
        + aa * np.log(xx)
        + bb * np.log1p(-xx)
    )
    qab, qap, qam = aa + bb, aa + 1.0, aa - 1.0
    c = np.ones_like(xx)
    d = 1.0 - qab * xx / qap
    d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
    h = d.copy()
    live = np.arange(xx.size)
    for m in range(1, 1000):
        xl, al, bl = xx[live], aa[live], bb[live]
        dl, cl = d[live], c[live]
        m2 = 2 * m
        num = m * (bl - m) * xl / ((qam[live] + m2) * (al + m2))
        dl = 1.0 + num * dl
        dl = 1.0 / np.where(np.abs(dl) < _TINY, _TINY, dl)
        cl = 1.0 + num / cl
        cl = np.where(np.abs(cl) < _TINY, _TINY, cl)
        step = dl * cl
        num = -(al + m) * (qab[live] + m) * xl / ((al + m2) * (qap[live] + m2))
        dl = 1.0 + num * dl
        dl = 1.0 / np.where(np.abs(dl) < _TINY, _TINY, dl)
        cl = 1.0 + num / cl
        cl = np.where(np.abs(cl) < _TINY, _TINY, cl)
        delta = dl * cl
        h[live] = h[live] * step * delta
        d[live], c[live] = dl, cl
        live = live[np.abs(delta - 1.0) >= _EPS]
        if live.size == 0:
            break
    cdf_small = np.exp(log_front) * h / aa  # I_xx(aa, bb)
    cdf = np.where(flip, 1.0 - cdf_small, cdf_small)
    flat[inner] = np.clip(1.0 - cdf, 0.0, 1.0)
    return flat.reshape(out.shape)


def tail_at_least(x: np.ndarray, a: np.ndarray, b: np.ndarray, level: float) -> np.ndarray:
    """Whether P(X >= x) >= `level` for X ~ Beta(a, b), elementwise, exactly.

    Most arms are settled by two bounds that hold for any distribution on [0, 1]: Markov's
    (P(X >= x) <= mean / x) rules an arm out, Cantelli's (P(X > x) >= t^2 / (var + t^2) with
    t = mean - x > 0) rules it in. Only the rest pay for the incomplete beta function, so a
    selection over 10,000 arms computes a handful of them."""
    x = np.asarray(x, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not x.shape == a.shape == b.shape:  # broadcast_arrays costs more than the test
        x, a, b = np.broadcast_arrays(x, a, b)
    tot = a + b
    mu = a / tot
    var = a * b / (tot * tot * (tot + 1.0))
    t = mu - x
    surely_in = (x <= 0.0) | ((t > 0.0) & (t * t >= level * (var + t * t)))
    surely_out = (x >= 1.0) | (mu < level * x)
    out = surely_in.copy()
    todo = np.flatnonzero(~surely_in & ~surely_out)
    if todo.size == 0:
        return out
    out[todo] = beta_sf_array(x[todo], a[todo], b[todo]) >= level
    return out


def beta_ppf_array(q: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quantiles of many Beta distributions at once: safeguarded Newton steps (bisection when a
    step would leave the bracket), so the dashboard's intervals for thousands of arms cost
    milliseconds. Agrees with `beta_ppf` to about 1e-10.

    Each quantile is found in its lower tail (the quantile q of Beta(a, b) above 1/2 is 1 minus
    the quantile 1 - q of Beta(b, a)), starting where the tail's leading term x^a / (a B(a, b))
    reaches q. Starting at the mean instead, a posterior like Beta(20.75, 0.25), whose upper
    quantiles lie within 1e-7 of 1, took about 50 rounds instead of 8."""
    q, a, b = np.broadcast_arrays(
        np.asarray(q, dtype=np.float64), np.asarray(a, np.float64), np.asarray(b, np.float64)
    )
    q, a, b = q.ravel(), a.ravel(), b.ravel()
    upper = q > 0.5
    q, a, b = np.where(upper, 1.0 - q, q), np.where(upper, b, a), np.where(upper, a, b)
    log_norm = lgamma_array(a + b) - lgamma_array(a) - lgamma_array(b)
    with np.errstate(divide="ignore"):
        x = np.exp((np.log(q) + np.log(a) - log_norm) / a)
    x = _newton_ppf(q, a, b, np.clip(x, 1e-300, 1 - 1e-12), log_norm)
    x = np.where(q <= 0.0, 0.0, x)
    return np.clip(np.where(upper, 1.0 - x, x), 0.0, 1.0)


def _newton_ppf(
    q: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, log_norm: np.ndarray
) -> np.ndarray:
    """Solve F(x; a, b) = q for x in [0, 1] from `x`, keeping each root bracketed."""
    lo, hi = np.zeros_like(q), np.ones_like(q)
    active = (q > 0.0) & (q < 1.0)
    for _ in range(200):
        if not active.any():
            break
        xa, aa, ba = x[active], a[active], b[active]
        f = (1.0 - beta_sf_array(xa, aa, ba)) - q[active]
        lo_a, hi_a = lo[active], hi[active]
        lo_a = np.where(f < 0, xa, lo_a)
        hi_a = np.where(f >= 0, xa, hi_a)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            pdf = np.exp(log_norm[active] + (aa - 1.0) * np.log(xa) + (ba - 1.0) * np.log1p(-xa))
            step = xa - f / pdf
        bad = ~np.isfinite(step) | (step <= lo_a) | (step >= hi_a)
        new = np.where(bad, 0.5 * (lo_a + hi_a), step)
        done = (np.abs(f) < 1e-13) | (hi_a - lo_a <= 1e-14 * hi_a) | (np.abs(new - xa) < 1e-15)
        x[active], lo[active], hi[active] = new, lo_a, hi_a
        idx = np.flatnonzero(active)
        x[idx[done]] = xa[done]
        active[idx[done]] = False
    return x


def credible_intervals(
    a: np.ndarray, b: np.ndarray, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """`credible_interval` for many arms at once."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    tail = (1.0 - level) / 2.0
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    qs = np.concatenate([np.full(a.size, tail), np.full(a.size, 1.0 - tail)])
    x = beta_ppf_array(qs, np.concatenate([a, a]), np.concatenate([b, b]))
    return x[: a.size], x[a.size :]


class IntervalMemo:
    """`credible_intervals` answers remembered per arm, by its (alpha, beta) and the level.
    A posterior read repeats until an observation is folded, and an observation changes only
    the arms it names: the rest are found here, and the quantiles (nearly all of a read's
    cost, about 5 ms for 32 arms) are computed for the changed arms alone."""

    def __init__(self, size: int = 65_536) -> None:
        self._size = size
        self._got: dict[tuple[float, float, float], tuple[float, float]] = {}

    def __call__(self, a: np.ndarray, b: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        keys = [(level, x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
        got = self._got
        missing = [i for i, k in enumerate(keys) if k not in got]
        if missing:
            if len(got) + len(missing) > self._size:
                got.clear()  # a world this large rarely repeats whole: start again
                missing = list(range(len(keys)))
            lo, hi = credible_intervals(a[missing], b[missing], level)
            for i, low, high in zip(missing, lo.tolist(), hi.tolist(), strict=True):
                got[keys[i]] = (low, high)
        pairs = np.array([got[k] for k in keys], dtype=np.float64).reshape(len(keys), 2)
        return pairs[:, 0].copy(), pairs[:, 1].copy()

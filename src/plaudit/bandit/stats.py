"""Beta-posterior statistics without scipy: the regularised incomplete beta function and its
inverse, so credible intervals are exact Beta quantiles at any level (not a normal
approximation, which leaves [0, 1] for small counts)."""

from __future__ import annotations

import math

import numpy as np

_EPS = 1e-15
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for I_x(a, b) by the modified Lentz method."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
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


def beta_sf_array(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(X > x) for X ~ Beta(a, b), elementwise: the same continued fraction, vectorised, so
    thousands of arms cost a few milliseconds instead of one Python loop each."""
    x, a, b = np.broadcast_arrays(
        np.asarray(x, dtype=np.float64), np.asarray(a, np.float64), np.asarray(b, np.float64)
    )
    out = np.where(x <= 0.0, 1.0, 0.0)
    inner = (x > 0.0) & (x < 1.0)
    if not inner.any():
        return out
    xi, ai, bi = x[inner], a[inner], b[inner]
    flip = xi >= (ai + 1.0) / (ai + bi + 2.0)
    # Evaluate the fraction where it converges fast: I_x(a,b) or 1 - I_{1-x}(b,a).
    xx = np.where(flip, 1.0 - xi, xi)
    aa = np.where(flip, bi, ai)
    bb = np.where(flip, ai, bi)
    lgam = np.vectorize(math.lgamma, otypes=[np.float64])
    front = np.exp(lgam(aa + bb) - lgam(aa) - lgam(bb) + aa * np.log(xx) + bb * np.log1p(-xx))
    qab, qap, qam = aa + bb, aa + 1.0, aa - 1.0
    c = np.ones_like(xx)
    d = 1.0 - qab * xx / qap
    d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
    h = d.copy()
    done = np.zeros(xx.shape, dtype=bool)
    for m in range(1, 1000):
        m2 = 2 * m
        num = m * (bb - m) * xx / ((qam + m2) * (aa + m2))
        d = 1.0 + num * d
        d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + num / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        h = np.where(done, h, h * d * c)
        num = -(aa + m) * (qab + m) * xx / ((aa + m2) * (qap + m2))
        d = 1.0 + num * d
        d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = 1.0 + num / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        delta = d * c
        h = np.where(done, h, h * delta)
        done |= np.abs(delta - 1.0) < _EPS
        if done.all():
            break
    cdf_small = front * h / aa  # I_xx(aa, bb)
    cdf = np.where(flip, 1.0 - cdf_small, cdf_small)
    out[inner] = np.clip(1.0 - cdf, 0.0, 1.0)
    return out


def beta_ppf_array(q: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quantiles of many Beta distributions at once: safeguarded Newton steps (bisection when a
    step would leave the bracket), so the dashboard's intervals for thousands of arms cost
    milliseconds. Agrees with `beta_ppf` to about 1e-10."""
    q, a, b = np.broadcast_arrays(
        np.asarray(q, dtype=np.float64), np.asarray(a, np.float64), np.asarray(b, np.float64)
    )
    q, a, b = q.ravel(), a.ravel(), b.ravel()
    lo, hi = np.zeros_like(q), np.ones_like(q)
    x = np.clip(a / (a + b), 1e-12, 1 - 1e-12)
    lgam = np.vectorize(math.lgamma, otypes=[np.float64])
    log_norm = lgam(a + b) - lgam(a) - lgam(b)
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
    x = np.where(q <= 0.0, 0.0, np.where(q >= 1.0, 1.0, x))
    return np.clip(x, 0.0, 1.0)


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

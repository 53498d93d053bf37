"""The fast paths of the hot arithmetic give exactly (bit for bit) what the plain code gave:
the plain versions are kept here as references, and random states that reach every branch
(alarms, inactive detectors, fresh arms) are compared against them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from plaudit.bandit import evidence, hierarchy, stats
from plaudit.bandit.evidence import (
    _MASK,
    HISTORY,
    MIN_EVIDENCE,
    DriftSettings,
    Step,
    _cusum,
    _llr,
    change_segment,
)


def _update_reference(
    st: dict[str, Any],
    r: Any,
    ds: DriftSettings,
    decay: Any = 1.0,
    *,
    detect: bool = True,
    index: float = 0.0,
) -> Step:
    """`evidence.update` before its no-alarm fast path (verbatim)."""
    r = np.asarray(r, dtype=np.float64)
    s = np.asarray(st["s"], dtype=np.float64) * decay
    f = np.asarray(st["f"], dtype=np.float64) * decay
    hist = ((np.asarray(st["hist"], dtype=np.int64) << 1) | r.astype(np.int64)) & _MASK
    hn = np.minimum(np.asarray(st["hn"], dtype=np.float64) + 1.0, HISTORY)
    out = dict(st)
    out["hist"], out["hn"] = hist, hn
    none = np.zeros(s.shape, dtype=bool)
    if not (ds.enabled and detect):
        out["s"], out["f"] = s + r, f + (1.0 - r)
        return Step(out, none, none)
    p0 = np.clip((s + 0.5) / (s + f + 1.0), 0.005, 0.995)
    p_up = np.minimum(0.95, np.maximum(2.0 * p0, p0 + 0.2))
    p_dn = p0 / 4.0
    active = (s + f) >= MIN_EVIDENCE
    gu, su, fu = _cusum(st["gu"], st["su"], st["fu"], _llr(r, p0, p_up), r)
    gd, sd, fd = _cusum(st["gd"], st["sd"], st["fd"], _llr(r, p0, p_dn), r)
    gu, gd = np.where(active, gu, 0.0), np.where(active, gd, 0.0)
    up, dn = gu > ds.rise_threshold, gd > ds.drop_threshold
    changed = up | dn
    seg_s = np.where(up, su, sd)
    seg_f = np.where(up, fu, fd)
    if changed.any():
        at = np.flatnonzero(np.atleast_1d(changed))
        cs, cf, found = change_segment(
            np.atleast_1d(hist)[at],
            np.atleast_1d(hn)[at],
            np.atleast_1d(p0)[at],
            np.atleast_1d(up)[at],
            ds.rise_threshold,
        )
        seg_s = np.array(np.atleast_1d(seg_s), dtype=np.float64)
        seg_f = np.array(np.atleast_1d(seg_f), dtype=np.float64)
        seg_s[at] = np.where(found, cs, seg_s[at])
        seg_f[at] = np.where(found, cf, seg_f[at])
        if np.ndim(s) == 0:
            seg_s, seg_f = seg_s[0], seg_f[0]
    s = np.where(changed, seg_s, s + r)
    f = np.where(changed, seg_f, f + (1.0 - r))
    pw = np.where(changed, ds.reset_prior_weight, st["pw"])
    central = dn & (p0 >= ds.central)
    zero = np.zeros_like(s)
    out.update(
        gu=np.where(changed, zero, gu),
        su=np.where(changed | ~active, zero, su),
        fu=np.where(changed | ~active, zero, fu),
        gd=np.where(changed, zero, gd),
        sd=np.where(changed | ~active, zero, sd),
        fd=np.where(changed | ~active, zero, fd),
        pw=pw,
        drop_at=np.where(central, float(index), st["drop_at"]),
    )
    out["s"], out["f"] = s, f
    return Step(out, np.asarray(changed, dtype=bool), np.asarray(central, dtype=bool))


def _state(rng: np.random.Generator, n: int, *, alarms: bool, inactive: bool) -> dict[str, Any]:
    lo = 0.0 if inactive else MIN_EVIDENCE
    st = {
        "s": rng.uniform(lo, 40.0, n),
        "f": rng.uniform(lo, 40.0, n),
        # near the alarm levels (6 and 12) when alarms are wanted, well below otherwise
        "gu": rng.uniform(0.0, 7.0 if alarms else 1.0, n),
        "gd": rng.uniform(0.0, 13.0 if alarms else 1.0, n),
        "su": rng.uniform(0.0, 10.0, n),
        "fu": rng.uniform(0.0, 10.0, n),
        "sd": rng.uniform(0.0, 10.0, n),
        "fd": rng.uniform(0.0, 10.0, n),
        "pw": rng.choice([1.0, 0.2], n),
        "hn": rng.integers(0, HISTORY + 1, n).astype(np.float64),
        "drop_at": rng.choice([-1.0, 3.0], n),
        "hist": rng.integers(0, 1 << HISTORY, n, dtype=np.int64),
    }
    if inactive:
        fresh = rng.random(n) < 0.3
        for k in ("s", "f"):
            st[k][fresh] = 0.0
    return st


@pytest.mark.parametrize("seed", range(40))
def test_update_equals_the_plain_code(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    st = _state(rng, n, alarms=seed % 2 == 0, inactive=seed % 3 == 0)
    r = (rng.random(n) < 0.5).astype(np.float64)
    ds = DriftSettings(enabled=seed % 7 != 0)
    decay = 1.0 if seed % 4 else rng.uniform(0.5, 1.0, n)
    for detect in (True, False):
        got = evidence.update(st, r, ds, decay, detect=detect, index=float(seed))
        want = _update_reference(st, r, ds, decay, detect=detect, index=float(seed))
        assert got.state.keys() == want.state.keys()
        for k, v in want.state.items():
            assert np.array_equal(np.asarray(got.state[k]), np.asarray(v)), k
            assert np.asarray(got.state[k]).dtype == np.asarray(v).dtype, k
        assert np.array_equal(got.changed, want.changed)
        assert np.array_equal(got.central_drop, want.central_drop)


def test_update_keeps_only_its_own_columns_when_not_detecting() -> None:
    """A labelled observation's global update is given only the columns it reads."""
    rng = np.random.default_rng(5)
    full = _state(rng, 20, alarms=True, inactive=True)
    part = {k: full[k] for k in ("s", "f", "hn", "hist")}
    r = (rng.random(20) < 0.5).astype(np.float64)
    got = evidence.update(part, r, DriftSettings(), detect=False)
    want = _update_reference(full, r, DriftSettings(), detect=False)
    assert got.state.keys() == part.keys()
    for k in part:
        assert np.array_equal(got.state[k], want.state[k])


def _context_prior_reference(
    sums: dict[str, Any], own_s: Any, own_f: Any, mu_global: Any, k0: float
) -> tuple[np.ndarray, np.ndarray]:
    """`hierarchy.context_prior` with np.clip (verbatim)."""
    c0, r0, r20, v0 = hierarchy.terms(own_s, own_f)
    c = np.asarray(sums["hc"], dtype=np.float64) - c0
    r = np.asarray(sums["hr"], dtype=np.float64) - r0
    r2 = np.asarray(sums["hr2"], dtype=np.float64) - r20
    v = np.asarray(sums["hv"], dtype=np.float64) - v0
    c = np.rint(np.maximum(c, 0.0))
    others = c >= 1.0
    cs = np.maximum(c, 1.0)
    m = np.clip(r / cs, 1e-6, 1.0 - 1e-6)
    spread = m * (1.0 - m)
    dev = np.maximum(r2 - cs * m * m, 0.0)
    tau_hat = np.maximum(dev - spread * np.maximum(v, 0.0), 0.0) / np.maximum(c - 1.0, 1.0)
    extra = np.maximum(c - 1.0, 0.0)
    tau2 = (hierarchy.W0 * spread / (k0 + 1.0) + extra * tau_hat) / (hierarchy.W0 + extra)
    kappa = np.clip(
        spread / np.maximum(tau2, 1e-300) - 1.0, hierarchy.KAPPA_MIN, hierarchy.KAPPA_MAX
    )
    inv_n = np.maximum(v, 0.0) / cs
    floor = np.where(inv_n <= 1.0 / hierarchy.ZERO_RATE_RUNS, hierarchy.ZERO_RATE * inv_n, 0.0)
    m = np.where(others & (r <= 1e-12), np.maximum(m, floor), m)
    return np.where(others, m, mu_global), np.where(others, kappa, k0)


@pytest.mark.parametrize("seed", range(20))
def test_context_prior_equals_the_plain_code(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 50
    contexts = rng.integers(0, 6, n).astype(np.float64)
    rate = rng.random(n) * (rng.random(n) < 0.8)  # some exactly 0, some extreme
    sums = {
        "hc": contexts,
        "hr": contexts * rate,
        "hr2": contexts * rate * rate * rng.uniform(0.5, 2.0, n),
        "hv": contexts * rng.uniform(0.0, 1.0, n),
    }
    own_s = rng.integers(0, 20, n).astype(np.float64)
    own_f = rng.integers(0, 20, n).astype(np.float64)
    mu = rng.random(n)
    got = hierarchy.context_prior(sums, own_s, own_f, mu, 2.0)
    want = _context_prior_reference(sums, own_s, own_f, mu, 2.0)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _betacf_reference(a: float, b: float, x: float) -> float:
    """`stats._betacf` before its loop was tightened (verbatim)."""
    tiny, eps = stats._TINY, stats._EPS
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def test_betacf_equals_the_plain_code() -> None:
    rng = np.random.default_rng(0)
    for _ in range(3000):
        a, b = (float(v) for v in np.exp(rng.uniform(-3.0, 7.0, 2)))
        x = float(rng.random())
        assert stats._betacf(a, b, x) == _betacf_reference(a, b, x)
    for a, b, x in ((1.0, 1.0, 0.5), (0.5, 0.5, 1e-9), (1e3, 1e-2, 0.999), (2.0, 3.0, 0.0)):
        assert stats._betacf(a, b, x) == _betacf_reference(a, b, x)


def test_rounded_propensities_equal_round() -> None:
    from plaudit.bandit.api import _rounded

    rng = np.random.default_rng(0)
    values = np.concatenate(
        [rng.random(500), np.ones(40), np.full(9, 0.005), [0.0, -0.0, 1e-7, 5e-7, 0.1234565]]
    ).tolist()
    rng.shuffle(values)
    got, want = _rounded(values), [round(v, 6) for v in values]
    assert [(v, math.copysign(1.0, v)) for v in got] == [(v, math.copysign(1.0, v)) for v in want]


def _terms_reference(s: Any, f: Any) -> tuple[Any, Any, Any, Any]:
    """`hierarchy.terms` without its all-have-data fast path (verbatim)."""
    s = np.asarray(s, dtype=np.float64)
    n = s + np.asarray(f, dtype=np.float64)
    has = n > 0.0
    safe = np.where(has, n, 1.0)
    r = np.where(has, s / safe, 0.0)
    return has.astype(np.float64), r, r * r, np.where(has, 1.0 / safe, 0.0)


@pytest.mark.parametrize("seed", range(10))
def test_terms_equal_the_plain_code(seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.0, 30.0, 40) * (rng.random(40) < 0.9)
    f = rng.uniform(0.0, 30.0, 40) * (rng.random(40) < 0.9)
    if seed % 2:
        s, f = s + 0.5, f + 0.5  # every arm has data
    for args in ((s, f), (float(s[0]), float(f[0])), (0.0, 0.0)):
        got, want = hierarchy.terms(*args), _terms_reference(*args)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype

"""Beta statistics: exact quantiles checked against closed forms and against sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.bandit.stats import (
    beta_cdf,
    beta_ppf,
    beta_ppf_array,
    beta_sf_array,
    confidence_tier,
    credible_interval,
    credible_intervals,
    mean,
    variance,
)

params = st.floats(0.05, 500, allow_nan=False)
probs = st.floats(0.001, 0.999)


@pytest.mark.parametrize("q", [0.025, 0.3, 0.5, 0.975])
@pytest.mark.parametrize("a", [0.5, 1.0, 3.0, 40.0])
def test_closed_forms(q: float, a: float) -> None:
    # Beta(a, 1): F(x) = x^a.  Beta(1, b): F(x) = 1 - (1 - x)^b.
    assert beta_ppf(q, a, 1.0) == pytest.approx(q ** (1 / a), abs=1e-9)
    assert beta_ppf(q, 1.0, a) == pytest.approx(1 - (1 - q) ** (1 / a), abs=1e-9)
    assert beta_cdf(0.37, a, 1.0) == pytest.approx(0.37**a, abs=1e-12)


def test_symmetric_median_and_arcsine() -> None:
    assert beta_ppf(0.5, 7.0, 7.0) == pytest.approx(0.5, abs=1e-10)
    # Beta(1/2, 1/2) is the arcsine law: F(x) = 2/pi * asin(sqrt(x)).
    x = 0.2
    assert beta_cdf(x, 0.5, 0.5) == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), abs=1e-10)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(0.5, 500), b=st.floats(0.5, 500), q=probs)
def test_ppf_inverts_cdf(a: float, b: float, q: float) -> None:
    x = beta_ppf(q, a, b)
    assert 0.0 <= x <= 1.0
    # (with parameters below 1/2 the CDF is so steep near 0 or 1 that doubles cannot hold x
    # finely enough for this check; the closed-form tests cover that range instead)
    assert beta_cdf(x, a, b) == pytest.approx(q, abs=1e-7)


@settings(max_examples=100, deadline=None)
@given(a=params, b=params, level=st.floats(0.5, 0.999))
def test_interval_is_clamped_ordered_and_contains_the_median(a: float, b: float, level: float):
    lo, hi = credible_interval(a, b, level)
    assert 0.0 <= lo <= beta_ppf(0.5, a, b) <= hi <= 1.0
    wider = credible_interval(a, b, min(0.9999, level + 0.0005))
    assert wider[0] <= lo + 1e-12 and wider[1] >= hi - 1e-12


@pytest.mark.parametrize(("a", "b"), [(3, 1), (1, 1), (4.5, 20.0), (60, 3)])
def test_interval_coverage_matches_sampling(a: float, b: float) -> None:
    rng = np.random.default_rng(0)
    draws = rng.beta(a, b, 200_000)
    for level in (0.5, 0.8, 0.95, 0.99):
        lo, hi = credible_interval(a, b, level)
        inside = float(((draws >= lo) & (draws <= hi)).mean())
        assert inside == pytest.approx(level, abs=0.005)


def test_small_counts_stay_inside_unit_interval() -> None:
    # The seed's normal approximation gives mean + 1.96 sd > 1 here; quantiles cannot.
    a, b = 3.0, 1.0
    assert mean(a, b) + 1.96 * math.sqrt(variance(a, b)) > 1.0
    assert credible_interval(a, b)[1] < 1.0


def test_mean_variance() -> None:
    assert mean(3, 1) == 0.75
    assert variance(3, 1) == pytest.approx(3 / (16 * 5))


@pytest.mark.parametrize(
    ("pulls", "tier"),
    [
        (0, "none"),
        (1, "low"),
        (4, "low"),
        (5, "medium"),
        (19, "medium"),
        (20, "high"),
        (49, "high"),
        (50, "very high"),
        (10_000, "very high"),
    ],
)
def test_confidence_tiers(pulls: int, tier: str) -> None:
    assert confidence_tier(pulls) == tier


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        credible_interval(1, 1, 1.0)
    with pytest.raises(ValueError):
        beta_cdf(0.5, 0, 1)


@settings(max_examples=50, deadline=None)
@given(
    xs=st.lists(
        st.tuples(st.floats(0, 1), st.floats(0.3, 800), st.floats(0.3, 800)),
        min_size=1,
        max_size=20,
    )
)
def test_vectorised_survival_matches_the_scalar_cdf(xs) -> None:
    x, a, b = (np.array(v) for v in zip(*xs, strict=True))
    got = beta_sf_array(x, a, b)
    want = np.array([1.0 - beta_cdf(*v) for v in xs])
    assert np.allclose(got, want, atol=1e-9)
    # a few arms go through a plain loop, many through the vectorised fraction: both agree
    many = beta_sf_array(np.resize(x, 300), np.resize(a, 300), np.resize(b, 300))
    assert np.allclose(many, np.resize(want, 300), atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(
    xs=st.lists(
        st.tuples(st.floats(0.001, 0.999), st.floats(0.5, 2000), st.floats(0.5, 2000)),
        min_size=1,
        max_size=20,
    )
)
def test_vectorised_quantiles_match_the_scalar_ones(xs) -> None:
    q, a, b = (np.array(v) for v in zip(*xs, strict=True))
    got = beta_ppf_array(q, a, b)
    want = np.array([beta_ppf(*v) for v in xs])
    assert np.allclose(got, want, atol=1e-9)
    lo, hi = credible_intervals(a, b, 0.9)
    assert np.allclose(lo, [credible_interval(x, y, 0.9)[0] for x, y in zip(a, b, strict=True)])
    assert np.allclose(hi, [credible_interval(x, y, 0.9)[1] for x, y in zip(a, b, strict=True)])


@settings(max_examples=100, deadline=None)
@given(
    xs=st.lists(
        st.tuples(st.floats(0.001, 0.999), st.floats(0.05, 60), st.floats(0.05, 60)),
        min_size=1,
        max_size=20,
    )
)
def test_vectorised_quantiles_invert_the_cdf_for_skewed_posteriors(xs) -> None:
    """Posteriors with a parameter below 1 (a prior of 0.25 and a few observations) put their
    upper quantiles within 1e-7 of 1: the quantile found still gives back its probability."""
    q, a, b = (np.array(v) for v in zip(*xs, strict=True))
    got = beta_ppf_array(q, a, b)
    assert ((got >= 0) & (got <= 1)).all()
    for x, (qq, aa, bb) in zip(got.tolist(), xs, strict=True):
        # within 1e-12 of the root: the CDF crosses q between x - 1e-12 and x + 1e-12 (near 1
        # it can rise by 1e-3 over that span, so the probability itself is no test)
        assert beta_cdf(max(0.0, x - 1e-12), aa, bb) <= qq + 1e-9
        assert beta_cdf(min(1.0, x + 1e-12), aa, bb) >= qq - 1e-9


def test_interval_memo_answers_as_credible_intervals() -> None:
    from plaudit.bandit.stats import IntervalMemo

    memo = IntervalMemo(size=2)
    a, b = np.array([0.75, 20.75, 3.0]), np.array([0.25, 0.25, 9.0])
    for level in (0.95, 0.9, 0.95):
        lo, hi = memo(a, b, level)
        want = credible_intervals(a, b, level)
        assert np.array_equal(lo, want[0]) and np.array_equal(hi, want[1])
        lo[:] = -1  # a caller's change never reaches the next answer
    b2 = b.copy()
    b2[2] = 10.0  # other inputs, another answer
    assert not np.array_equal(memo(a, b2, 0.95)[1], memo(a, b, 0.95)[1])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([0.25, 0.75, 1.0, 3.0, 20.75]),
                st.sampled_from([0.25, 1.0, 9.0, 40.25]),
            ),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(min_value=1, max_value=12),
)
def test_interval_memo_equals_a_fresh_computation_as_arms_change(reads, size) -> None:
    """Reads of posteriors where some arms changed since the last read (an observation folded)
    and some did not: every answer equals computing all the intervals afresh."""
    from plaudit.bandit.stats import IntervalMemo

    memo = IntervalMemo(size=size)
    for arms in reads:
        a, b = (np.array(v) for v in zip(*arms, strict=True))
        lo, hi = memo(a, b, 0.95)
        want = credible_intervals(a, b, 0.95)
        assert np.array_equal(lo, want[0]) and np.array_equal(hi, want[1])

"""The savings figure a user sees: the library, the CLI, HTTP and the example report the saving
the simulator measured, on a budget that fits the inventory and on one that binds."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from plaudit import Plaudit
from plaudit.bandit import policy
from plaudit.bandit.simulator import run_store
from plaudit.bandit.workloads import stationary
from plaudit.cli import main
from plaudit.server.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def _measured_against_counterfactual(sc, tokens: list[int], fits: bool) -> float:
    """The saving the simulator measures: against the whole inventory when it fits, else
    against random-order fills of the budget (what plaudit's counterfactual stands for)."""
    if fits:
        full = float(sc.tokens.sum()) * len(tokens)
    else:
        rng = np.random.default_rng(0)
        inp = policy.PolicyInput(
            alpha=np.ones(sc.n),
            beta=np.ones(sc.n),
            tokens=sc.tokens,
            protected=np.zeros(sc.n, dtype=bool),
            underexplored=np.zeros(sc.n, dtype=bool),
            budget=sc.budget,
            bar=np.zeros(sc.n),
        )
        full = float(sum(int(sc.tokens[policy.baseline(inp, rng)].sum()) for _ in tokens))
    return (1 - sum(tokens) / full) * 100


@pytest.mark.parametrize("budget", ["fits", "binds"])
def test_every_surface_reports_the_measured_saving(
    db_url: str, budget: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = stationary()
    fits = budget == "fits"
    sc.budget = 40_000 if fits else 9_000  # the inventory holds about 22,700 tokens
    with Plaudit.open(db_url) as p:
        m = run_store(p, sc, 160, seed=3)
        lib = p.bandit.savings()
        with TestClient(create_app(p)) as c:
            http = c.get("/v1/bandit/savings").json()
    measured = _measured_against_counterfactual(sc, m.tokens, fits)
    assert measured > 20  # the learner leaves unneeded arms out in both cases
    assert lib["counterfactual"] == (
        "the full inventory" if fits else "random-order fill up to the budget"
    )
    assert lib["prompt_ci_low"] <= measured <= lib["prompt_ci_high"]
    if fits:  # the counterfactual is the inventory itself, so the figures agree exactly
        assert lib["prompt_savings_percent"] == pytest.approx(measured)
        assert lib["prompt_savings_percent"] == pytest.approx(lib["inventory_savings_percent"])
    assert http["prompt_savings_percent"] == pytest.approx(lib["prompt_savings_percent"])

    assert main(["--db", db_url, "savings", "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["prompt_savings_percent"] == pytest.approx(lib["prompt_savings_percent"])
    assert main(["--db", db_url, "savings"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    shown = float(re.match(r"token savings: (-?[\d.]+)%", first).group(1))
    assert shown == pytest.approx(lib["prompt_savings_percent"], abs=0.05)


def test_the_example_prints_the_saving_the_store_holds(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    s = mod.main(["--db", str(tmp_path / "ex.db"), "--runs", "120"])
    out = capsys.readouterr().out
    shown = float(re.search(r"token savings: (-?[\d.]+)%", out).group(1))
    assert s["prompt_savings_percent"] > 20  # the example's inventory fits its budget
    assert shown == pytest.approx(s["prompt_savings_percent"], abs=0.05)

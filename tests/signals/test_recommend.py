"""`signal recommend` (and shadow mode), `signal compare`, the learned model format, and the
loop's HTTP routes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from plaudit import Plaudit, compare_policy, recommend
from plaudit.errors import ConflictError, ValidationError
from plaudit.seqmem import import_file
from plaudit.signals import simulate
from plaudit.signals.policy import load_policy

from .conftest import run_plaudit
from .test_routes import _app

START = 1_790_000_000_000
AGE = 10**6
TABLE = {
    "schema_version": "plaudit_router_policy_v1",
    "key": ["context.ci_status"],
    "table": {"failing": {"fix": 0.8, "test": 0.2}, "passing": {"test": 0.9, "review": 0.1}},
    "default": {"test": 1.0},
}
MODEL = {
    "schema_version": "plaudit_router_model_v1",
    "key": ["event_history.-1.chosen_task"],
    "tasks": ["a", "b", "c"],
    "explore": 0.3,
    "values": {"a": {"a": 0.1, "b": 0.9, "c": 0.5}},
    "default": {"a": 0.9, "b": 0.2, "c": 0.1},
}


def test_the_pick_is_drawn_from_the_probabilities_and_fixed_per_decision_id() -> None:
    ctx = {"ci_status": "failing"}
    first = recommend(TABLE, context=ctx, decision_id="d-1")
    assert first["probabilities"] == {"fix": 0.8, "test": 0.2}
    assert first["propensity"] == first["probabilities"][first["task"]]
    assert all(recommend(TABLE, context=ctx, decision_id="d-1") == first for _ in range(5))
    picks = Counter(
        recommend(TABLE, context=ctx, decision_id=f"d-{i}")["task"] for i in range(4000)
    )
    assert abs(picks["fix"] / 4000 - 0.8) < 0.03
    assert recommend(TABLE, context=ctx, greedy=True)["task"] == "fix"
    assert recommend(TABLE, context={"ci_status": "unknown"})["task"] == "test"  # the default


def test_a_tables_distribution_is_limited_to_the_candidates() -> None:
    ctx = {"ci_status": "passing"}
    rec = recommend(TABLE, context=ctx, candidates=["review", "deploy"])
    assert rec["probabilities"] == {"review": 1.0}
    nothing = recommend(TABLE, context=ctx, candidates=["deploy", "ship"])
    assert nothing["probabilities"] == {"deploy": 0.5, "ship": 0.5}


def test_a_model_is_epsilon_greedy_over_the_candidates_it_knows() -> None:
    history = [{"t_minus": 1, "decision_id": "x", "chosen_task": "a", "ts_ms": 1}]
    after_a = recommend(MODEL, decision={"event_history": history}, greedy=True)
    assert after_a["task"] == "b"
    assert after_a["probabilities"] == pytest.approx({"a": 0.1, "b": 0.8, "c": 0.1})
    first = recommend(MODEL, candidates=["c", "b", "unknown"], greedy=True)  # no history: default
    assert first["task"] == "b" and first["probabilities"] == pytest.approx({"b": 0.85, "c": 0.15})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"values": {"a": {"a": 1, "b": 1, "c": 1, "zz": 1}}}, "task 'zz' is not in tasks"),
        ({"values": {"a": {"a": 1, "b": "x", "c": 1}}}, "values.a: policy: value of 'b' must be"),
        ({"explore": 1.5}, "explore must be a number in [0, 1]"),
        ({"tasks": ["a", "a"]}, "tasks must be a list of distinct task names"),
        ({"default": None}, "a model needs its default values"),
        ({"defualt": {}}, "unknown field 'defualt'"),
    ],
)
def test_a_model_that_does_not_check_is_refused_naming_where(change: dict, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        load_policy({**MODEL, **change})
    assert words in str(caught.value)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(TABLE))
    for args, words in (
        (["--context-json", "[1]"], "context: must be a JSON object"),
        (["--context-json", "{"], "--context-json"),
        (["--decision-json", '{"chosen_task": "x"}'], "'chosen_task' is not a field"),
        (["--shadow"], "--decision-id"),
    ):
        proc = run_plaudit("signal", "recommend", "--policy", str(policy), *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert words in proc.stderr and "Traceback" not in proc.stderr


def test_cli_prints_the_task_and_its_probabilities(tmp_path: Path) -> None:
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(TABLE))
    proc = run_plaudit(
        "signal",
        "recommend",
        "--policy",
        str(policy),
        "--context-json",
        '{"ci_status": "passing"}',
        "--candidates",
        "test,review",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["probabilities"] == {"test": 0.9, "review": 0.1}
    assert out["task"] in out["probabilities"]


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store with 2,500 decisions of the mediocre router and a policy learned from it."""
    work = tmp_path_factory.mktemp("loop")
    log = work / "sim.jsonl"
    with open(log, "w") as f:
        simulate.mediocre().write(f, 2500, seed=9, start_ms=START, sessions=250)
    db = work / "p.db"
    with Plaudit.open(db) as p:
        import_file(p.log, log)
        p.signals.learn(work / "policy.json", now_ms=START + 10**8, max_age_hours=AGE, bootstrap=0)
    return db, work / "policy.json"


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "router_loop.py"


def _example() -> Any:
    """examples/router_loop.py as a module: its shadow phase is the one these tests run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("router_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shadow_records_beside_the_decision_and_compare_reports_them(loop) -> None:
    db, policy = loop
    with Plaudit.open(db) as p:
        sim, later = simulate.mediocre(), START + 10**7
        _example().shadow(p, sim, policy, 300, later)  # the router decides, the policy in shadow
        first = next(sim.rows(1, seed=99, start_ms=later, sessions=30))
        d = json.loads(first["subject"])
        kept = {"context": d["context"], "candidates": d["candidates"], "shadow": True}
        again = p.signals.recommend(
            policy, decision_id=d["decision_id"], session_id=d["session_id"], **kept
        )
        assert again["shadow"]["status"] == "present"  # a retry records nothing new
        with pytest.raises(ConflictError):  # another recommendation for the same decision
            p.signals.recommend(policy, decision_id=d["decision_id"], **{**kept, "context": {}})
        result = p.signals.compare(policy, now_ms=START + 10**8, max_age_hours=AGE, bootstrap=300)
    shadow = result["shadow"]
    assert shadow["records"] >= 300 and shadow["with_outcome"] == 300
    assert 0.0 < shadow["agreement"] < 1.0
    assert shadow["reward_when_agreed"] > shadow["reward_when_disagreed"]
    assert shadow["estimate"]["evaluated"] == 300
    assert result["promote"] and result["load"]["policy"] == str(policy)


def test_compare_exits_0_only_above_the_threshold_with_enough_ess(loop) -> None:
    db, policy = loop
    base = [
        "signal",
        "compare",
        "--policy",
        str(policy),
        "--db",
        str(db),
        "--max-age-hours",
        str(AGE),
        "--bootstrap",
        "200",
    ]
    yes = run_plaudit(*base)
    assert yes.returncode == 0, yes.stderr
    assert "PROMOTE" in yes.stdout and "the router should load" in yes.stdout
    high = run_plaudit(*base, "--threshold", "0.9")
    assert high.returncode == 1 and "KEEP the current router" in high.stderr
    scarce = run_plaudit(*base, "--min-ess", "1000000", "--json")
    assert scarce.returncode == 1
    assert "effective sample size" in json.loads(scarce.stdout)["gate"]["reason"]


def test_a_hand_written_policy_learned_from_nothing_is_compared_on_every_decision(loop) -> None:
    db, _ = loop
    with Plaudit.open(db) as p:
        result = compare_policy(
            TABLE | {"key": [], "table": {}, "default": {"ai:flow/test": 1.0}},
            plaudit=p,
            max_age_hours=AGE,
            bootstrap=0,
        )
    assert result["offline"]["skipped"] == 0 and not result["promote"]


@pytest.fixture
def client(pl: Plaudit, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(_app(pl, export_root=str(tmp_path))) as c:
        yield c


def test_learn_recommend_and_compare_over_http(client: TestClient, tmp_path: Path) -> None:
    with open(tmp_path / "sim.jsonl", "w") as f:
        simulate.mediocre().write(f, 1500, seed=2, start_ms=START, sessions=150)
    r = client.post(
        "/v1/signals/learn",
        json={"seq_mem": "sim.jsonl", "out": "policy.json", "max_age_hours": AGE, "bootstrap": 0},
    )
    assert r.status_code == 200, r.text
    assert r.json()["policy"].endswith("policy.json") and "spec" not in r.json()
    r = client.post(
        "/v1/signals/recommend",
        json={
            "policy_path": "policy.json",
            "context": {"ci_status": "failing", "change": "code"},
            "decision_id": "h-1",
            "shadow": True,
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["task"] in r.json()["probabilities"] and r.json()["shadow"]["status"]
    r = client.post(
        "/v1/signals/compare",
        json={
            "policy_path": "policy.json",
            "seq_mem": "sim.jsonl",
            "max_age_hours": AGE,
            "bootstrap": 200,
            "min_ess": 20.0,  # a small log: a few hundred held-out decisions
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["promote"] is True, r.json()["gate"]
    r = client.post("/v1/signals/recommend", json={"policy": TABLE, "policy_path": "x.json"})
    assert r.status_code == 422
    r = client.post(
        "/v1/signals/learn",
        json={"seq_mem": "sim.jsonl", "max_age_hours": AGE, "gates": {"min_decisions": 10**6}},
    )
    assert r.status_code == 409 and r.json()["gates"][0]["name"] == "min_decisions"
    r = client.post("/v1/signals/learn", json={"out": "../escape.json"})
    assert r.status_code == 422 and not (tmp_path.parent / "escape.json").exists()


def test_the_example_runs_the_loop_end_to_end(tmp_path: Path, monkeypatch, capsys) -> None:
    import runpy
    import sys

    argv = ["router_loop.py", "--db", str(tmp_path / "ex.db"), "--decisions", "3000"]
    monkeypatch.setattr(sys, "argv", [*argv, "--shadow", "150"])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "2. learned a table on" in out and "4. compare: PROMOTE" in out
    assert "truth: the learned policy earns" in out

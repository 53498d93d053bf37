"""`signal learn`: gates first, a better router from the simulator, and never an estimate from
the decisions it learned from."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import LearnRefused, Plaudit, compare_policy, learn_policy
from plaudit.errors import ValidationError
from plaudit.seqmem import import_file
from plaudit.signals import simulate
from plaudit.signals.contract import build_decision, build_outcome, build_override
from plaudit.signals.evaluate import evaluate_policy
from plaudit.signals.policy import load_policy
from plaudit.signals.seqmem_file import seq_mem_row

from .conftest import run_plaudit, write_rows

START = 1_790_000_000_000
AGE = 10**6


def _now(decisions: int) -> int:
    return START + decisions * 6_000


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 decisions of the mediocre router (explores 30%), 300 sessions."""
    path = tmp_path_factory.mktemp("learn") / "sim.jsonl"
    with open(path, "w") as f:
        simulate.mediocre().write(f, 3000, seed=7, start_ms=START, sessions=300)
    return path


@pytest.fixture(scope="module")
def learned(sim_log: Path) -> tuple[dict[str, Any], Path]:
    out = sim_log.parent / "policy.json"
    result = learn_policy(
        out, seq_mem=sim_log, now_ms=_now(3000), max_age_hours=AGE, bootstrap=300, seed=3
    )
    return result, out


def test_it_learns_what_the_context_says_and_beats_the_mediocre_router(learned) -> None:
    result, out = learned
    sim = simulate.mediocre()
    prov = result["provenance"]
    assert sorted(prov["features"]["selected"]) == ["context.change", "context.ci_status"]
    assert "context.branch" in prov["features"]["considered"]  # noise, considered and left out
    policy = load_policy(out)
    assert policy.kind == "table" and policy.provenance == prov
    truth = sim.policy_value(policy, decisions=4000)
    assert truth >= 0.9 * sim.best_value()
    assert truth >= 1.5 * sim.logging_value()
    # Exploration is in the emitted policy: every task keeps its floor, everywhere.
    for tasks, probs in [policy.default, *_leaves(policy.table)]:
        assert set(tasks) == set(sim.tasks) and min(probs) == pytest.approx(0.05 / 5)
    ev = result["evaluation"]
    dr = ev["estimates"]["dr"]
    assert dr["ci"][0] <= truth <= dr["ci"][1]
    assert dr["difference_ci"][0] > 0  # better than the logging router, with its interval
    assert prov["rows"]["used"] + prov["rows"]["held_out"] == prov["rows"]["joined"]
    assert ev["decisions"] == prov["rows"]["held_out"] > 0


def _leaves(level: Any) -> list[Any]:
    if isinstance(level, tuple):
        return [level]
    return [leaf for sub in level.values() for leaf in _leaves(sub)]


def test_provenance_names_the_source_and_the_logs_head(sim_log: Path, tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "p.db") as p:
        import_file(p.log, sim_log)
        head = p.log.head()
        result = p.signals.learn(
            tmp_path / "policy.json", now_ms=_now(3000), max_age_hours=AGE, bootstrap=0
        )
    source = result["provenance"]["source"]
    assert source["kind"] == "log" and source["head"] == {
        "length": head.length,
        "digest": head.digest,
    }
    written = json.loads((tmp_path / "policy.json").read_text())
    assert written["provenance"]["seed"] == 0
    assert written["provenance"]["split"] == {"by": "session", "seed": 0, "holdout_percent": 30}


def test_the_held_out_estimate_is_what_compare_finds_on_the_decisions_never_learned_from(
    learned, sim_log: Path
) -> None:
    result, out = learned
    again = compare_policy(
        out, seq_mem=sim_log, now_ms=_now(3000), max_age_hours=AGE, bootstrap=300, seed=3
    )
    prov = result["provenance"]
    assert again["offline"]["skipped"] == prov["rows"]["used"]
    assert again["offline"]["evaluated"] == result["evaluation"]["evaluated"]
    assert again["offline"]["dr"] == result["evaluation"]["estimates"]["dr"]


def _log(
    path: Path, n: int, seed: int, success: dict[str, float], subsets: list[list[str]]
) -> Path:
    """n decisions, each among one of `subsets` (its candidates) chosen uniformly, the task
    uniformly among them (its propensity logged); `success[task]` the chance it succeeds; one
    decision in ten overridden (the gates ask for overrides). Five decisions a session."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        cands = rnd.choice(subsets)
        task = rnd.choice(cands)
        did, session, ts = f"d-{i}", f"s-{i // 5}", START + 1000 * i
        d = build_decision(
            decision_id=did,
            chosen_task=task,
            confidence=0.5,
            user_intent="",
            session_id=session,
            candidates=cands,
            propensity=1 / len(cands),
        )
        rows.append(seq_mem_row(d, ts))
        if i % 10 == 0:
            v = build_override(
                decision_id=did, original_task=task, override_task=task, session_id=session
            )
            rows.append(seq_mem_row(v, ts + 1))
        outcome = "success" if rnd.random() < success[task] else "failure"
        o = build_outcome(
            decision_id=did,
            outcome=outcome,
            task_executed=task,
            time_to_resolution_ms=5,
            session_id=session,
        )
        rows.append(seq_mem_row(o, ts + 2))
    return write_rows(path, rows)


def test_a_policy_that_memorises_decision_ids_gains_nothing_in_the_estimate(
    tmp_path: Path,
) -> None:
    # Rewards that no context predicts: a memoriser's in-sample gain is pure overfitting.
    noise = {"a": 0.5, "b": 0.5, "c": 0.5}
    log = _log(tmp_path / "noise.jsonl", 1500, 11, noise, [["a", "b", "c"]])
    out = tmp_path / "memo.json"
    now = START + 1500 * 1000 + 10_000
    result = learn_policy(
        out,
        seq_mem=log,
        features=["decision_id"],
        now_ms=now,
        max_age_hours=AGE,
        bootstrap=300,
        seed=5,
        max_features=1,
    )
    memo = load_policy(out)
    assert len(memo.table) == result["provenance"]["rows"]["used"]  # one entry per id learned
    # On the decisions it learned from, the memoriser looks far better than the router...
    in_sample = evaluate_policy(memo, seq_mem=log, now_ms=now, max_age_hours=AGE, bootstrap=0)
    assert in_sample["estimates"]["dr"]["difference"] > 0.1
    # ...on the held-out ones it is its default, exactly: the ids it memorised are not there.
    spec = json.loads(out.read_text())
    default_only = {k: spec[k] for k in ("schema_version", "default", "provenance")}
    held = compare_policy(memo, seq_mem=log, now_ms=now, max_age_hours=AGE, bootstrap=300, seed=5)
    fallback = compare_policy(
        default_only,
        seq_mem=log,
        now_ms=now,
        max_age_hours=AGE,
        bootstrap=300,
        seed=5,
        reward_key=["decision_id"],
    )
    assert held["offline"]["dr"]["value"] == fallback["offline"]["dr"]["value"]
    assert result["evaluation"]["estimates"]["dr"]["value"] == held["offline"]["dr"]["value"]
    lo = result["evaluation"]["estimates"]["dr"]["difference_ci"][0]
    assert lo < 0.05 and abs(result["evaluation"]["estimates"]["dr"]["difference"]) < 0.06


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**20), holdout=st.integers(5, 95))
def test_train_and_held_out_sessions_never_meet(sim_log: Path, seed: int, holdout: int) -> None:
    result = learn_policy(
        None,
        seq_mem=sim_log,
        now_ms=_now(3000),
        max_age_hours=AGE,
        bootstrap=0,
        seed=seed,
        holdout_percent=holdout,
        features=["context.ci_status"],
    )
    prov = result["provenance"]
    again = compare_policy(
        result["spec"], seq_mem=sim_log, now_ms=_now(3000), max_age_hours=AGE, bootstrap=0
    )
    # compare leaves out exactly the decisions learn used, and evaluates exactly the others.
    assert again["offline"]["skipped"] == prov["rows"]["used"]
    assert again["offline"]["evaluated"] == prov["rows"]["held_out"]
    assert prov["sessions"]["used"] + prov["sessions"]["held_out"] == 300


def test_it_refuses_until_the_gates_pass_and_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "plain.jsonl"
    with open(log, "w") as f:  # the plain scenario logs no override, and mostly one task
        simulate.router().write(f, 800, seed=1, start_ms=START)
    out = tmp_path / "policy.json"
    with pytest.raises(LearnRefused) as caught:
        learn_policy(out, seq_mem=log, now_ms=_now(800), max_age_hours=AGE)
    assert [g["name"] for g in caught.value.failed] == ["max_task_dominance", "min_overrides"]
    assert "min_overrides: actual=0 threshold=20" in str(caught.value)
    assert not out.exists()
    proc = run_plaudit(
        "signal", "learn", "--out", str(out), "--seq-mem", str(log), "--max-age-hours", str(AGE)
    )
    assert proc.returncode == 1
    assert "fail min_overrides: actual=0 threshold=20" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    # The user may accept a threshold, as with `signal audit`:
    ok = run_plaudit(
        "signal",
        "learn",
        "--out",
        str(out),
        "--seq-mem",
        str(log),
        "--max-age-hours",
        str(AGE),
        "--min-overrides",
        "0",
        "--max-task-dominance",
        "1",
        "--bootstrap",
        "0",
    )
    assert ok.returncode == 0, ok.stderr
    assert "held out" in ok.stdout and out.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--explore", "0"], "explore: must be a number in (0, 1)"),
        (["--holdout-percent", "100"], "holdout_percent: must be an integer in [5, 95]"),
        (["--feature", "chosen_task"], "does not start at a decision field"),
        (["--min-overrides", "x"], "'x' is not a valid integer"),
        (["--out", "."], "exists and is not a regular file"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(
    tmp_path: Path, sim_log: Path, args: list[str], words: str
) -> None:
    out = tmp_path / "p.json"
    proc = run_plaudit("signal", "learn", "--out", str(out), "--seq-mem", str(sim_log), *args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_candidates_that_leave_tasks_out_make_a_model_that_chooses_among_them(
    tmp_path: Path,
) -> None:
    # Candidates often leave the best task out: `a` is best, then `b`.
    success = {"a": 0.8, "b": 0.5, "c": 0.2}
    log = _log(tmp_path / "c.jsonl", 1200, 4, success, [["a", "b", "c"], ["b", "c"]])
    out = tmp_path / "model.json"
    now = START + 1200 * 1000 + 10_000
    result = learn_policy(
        out,
        seq_mem=log,
        now_ms=now,
        max_age_hours=AGE,
        bootstrap=0,
        gates={"max_task_dominance": 1.0},
    )
    assert result["format"] == "model"
    model = load_policy(out)
    assert model.kind == "model"
    from plaudit import recommend

    full = recommend(out, candidates=["a", "b", "c"], greedy=True)
    assert full["task"] == "a" and full["probabilities"]["a"] == pytest.approx(1 - 0.05 + 0.05 / 3)
    partial = recommend(out, candidates=["b", "c"], greedy=True)
    assert partial["task"] == "b" and set(partial["probabilities"]) == {"b", "c"}
    # `signal evaluate` reads the model like any policy, per decision's candidates.
    res = evaluate_policy(out, seq_mem=log, now_ms=now, max_age_hours=AGE, bootstrap=0)
    assert res["estimates"]["dr"]["difference"] > 0.1
    broken = {**json.loads(out.read_text()), "key": ["context.x"], "values": {"x": {"a": 1.0}}}
    with pytest.raises(ValidationError, match=r"values\.x: policy: value of 'b' must be a number"):
        load_policy(broken)

"""`plaudit signal evaluate` and `evaluate_policy`: reading decisions, propensity handling,
policy validation, the coverage gate, and the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plaudit
from plaudit.errors import ValidationError
from plaudit.events import make_event
from plaudit.seqmem import import_file
from plaudit.signals import simulate
from plaudit.signals.contract import DECISION, OUTCOME
from plaudit.signals.evaluate import evaluate_policy
from plaudit.signals.export import export
from plaudit.signals.policy import DECISION_FIELDS, check_distribution, load_policy

from .conftest import BIG_AGE, run_plaudit, write_rows

T0 = 1_780_000_000_000
TASKS = ("a", "b")


def sim_file(path: Path, n: int = 300, seed: int = 1) -> Path:
    with open(path, "w") as f:
        simulate.router().write(f, n, seed=seed, start_ms=T0)
    return path


def raw_row(name: str, subject: dict[str, Any], ts: int) -> dict[str, Any]:
    """A seq_mem row built by hand, so a subject can hold what the contract refuses."""
    return {"ts_ms": ts, "name": name, "session_id": "s", "subject": json.dumps(subject)}


def decision(did: str, ts: int, task: str = "a", **extra: Any) -> dict[str, Any]:
    subject = {"decision_id": did, "session_id": "s", "chosen_task": task, "confidence": 0.5}
    subject.update(candidates=list(TASKS), context={"kind": "x"}, **extra)
    return raw_row(DECISION, subject, ts)


def outcome(did: str, ts: int, result: str = "success", task: str = "a") -> dict[str, Any]:
    subject = {"decision_id": did, "outcome": result, "task_executed": task}
    return raw_row(OUTCOME, subject, ts)


UNIFORM = {"default": {"a": 0.5, "b": 0.5}}


def evaluate_rows(tmp_path: Path, pairs: list[tuple[Any, str]], **kw: Any) -> dict[str, Any]:
    """Decisions with the given propensity entries (`...` leaves the key out) and outcomes."""
    rows: list[Any] = []
    for i, (p, result) in enumerate(pairs):
        extra = {} if p is ... else {"propensity": p}
        rows += [decision(f"d{i}", T0 + i * 10, **extra), outcome(f"d{i}", T0 + i * 10 + 1, result)]
    src = write_rows(tmp_path / "in.jsonl", rows)
    return evaluate_policy(kw.pop("policy", UNIFORM), seq_mem=src, max_age_hours=BIG_AGE, **kw)


# -- propensities ----------------------------------------------------------------------------


def test_propensities_missing_and_invalid_are_counted_and_left_out(tmp_path) -> None:
    pairs = [
        (0.5, "success"),
        (1.0, "failure"),
        (..., "success"),  # never logged
        (None, "success"),  # logged as null: missing too
        (0, "success"),
        (-0.2, "success"),
        (1.5, "success"),
        ("0.3", "success"),
        (True, "success"),
        (math.nan, "success"),
        ({"p": 1}, "success"),
    ]
    res = evaluate_rows(tmp_path, pairs, bootstrap=0)
    c = res["counts"]
    assert (c["joined_rows"], c["evaluated"]) == (11, 2)
    assert (c["missing_propensity"], c["invalid_propensity"], c["defaulted_propensity"]) == (
        2,
        7,
        0,
    )
    samples = {
        s["decision_id"]: (s["propensity"], s["reason"])
        for s in res["propensity"]["invalid_samples"]
    }
    assert samples == {
        "d4": (0, "<= 0"),
        "d5": (-0.2, "<= 0"),
        "d6": (1.5, "> 1"),
        "d7": ("0.3", "not a number"),
        "d8": (True, "not a number"),
        "d9": ("NaN", "not finite"),
        "d10": ('{"p":1}', "not a number"),
    }
    json.dumps(res, allow_nan=False)  # the result stays strict JSON
    assert res["propensity"]["coverage"] == pytest.approx(2 / 11, abs=1e-6)
    # evaluated: d0 (w = 0.5/0.5, reward 1) and d1 (w = 0.5/1, reward 0)
    assert res["estimates"]["ips"]["value"] == pytest.approx((1.0 * 1 + 0.5 * 0) / 2)
    assert res["logging"]["value"] == pytest.approx(0.5)
    assert res["pass"] is True


def test_a_default_propensity_fills_missing_ones_only(tmp_path) -> None:
    pairs = [(0.5, "success"), (..., "success"), (None, "failure"), ("x", "success"), (2, "wasted")]
    res = evaluate_rows(tmp_path, pairs, default_propensity=0.25, bootstrap=0)
    c = res["counts"]
    assert (c["evaluated"], c["defaulted_propensity"], c["invalid_propensity"]) == (3, 2, 2)
    assert c["missing_propensity"] == 0
    # coverage counts logged propensities only: a default is an assumption, not a record
    assert res["propensity"]["coverage"] == pytest.approx(1 / 5, abs=1e-6)
    # weights: 0.5/0.5 = 1 for d0, 0.5/0.25 = 2 for the two defaulted ones
    assert res["estimates"]["ips"]["value"] == pytest.approx((1 * 1 + 2 * 1 + 2 * 0) / 3)


def test_invalid_propensities_in_the_log_are_told_apart_from_missing_ones(pl) -> None:
    """Events appended to the log directly (as `plaudit log import` would) skip the emit
    contract; the evaluation still tells a bad propensity from a missing one."""
    events = []
    for i, p in enumerate([0.5, "high", None, ...]):
        subject = json.loads(decision(f"d{i}", T0 + i)["subject"])
        if p is not ...:
            subject["propensity"] = p
        events.append(make_event(DECISION, subject, id=f"d{i}", ts_ms=T0 + i, session_id="s"))
        o = json.loads(outcome(f"d{i}", T0 + i + 1)["subject"])
        events.append(make_event(OUTCOME, o, id=f"o{i}", ts_ms=T0 + i + 1, session_id="s"))
    pl.log.append_batch(events)
    res = pl.signals.evaluate(UNIFORM, max_age_hours=BIG_AGE, bootstrap=0)
    c = res["counts"]
    assert (c["evaluated"], c["invalid_propensity"], c["missing_propensity"]) == (1, 1, 2)
    assert res["propensity"]["invalid_samples"] == [
        {"decision_id": "d1", "propensity": "high", "reason": "not a number"}
    ]


# -- reading the log and files alike -----------------------------------------------------


def test_the_log_and_the_file_give_the_same_evaluation(tmp_path, pl) -> None:
    src = sim_file(tmp_path / "s.jsonl", n=250)
    import_file(pl.log, src)
    sim = simulate.router()
    table = sim.table(simulate.CANDIDATE)
    from_file = evaluate_policy(table, seq_mem=src, max_age_hours=BIG_AGE, bootstrap=200)
    from_log = plaudit.evaluate_policy(table, plaudit=pl, max_age_hours=BIG_AGE, bootstrap=200)
    for key in ("counts", "logging", "estimates", "effective_sample_size", "diagnostics"):
        assert from_file[key] == from_log[key], key
    assert from_log["input"]["source"] == "log" and from_file["input"]["source"] == "seq_mem"


def test_rewards_are_the_rl_exports_rewards(tmp_path) -> None:
    """One definition of reward: the logging policy's value is the mean `reward` of the RL
    export's rows, with the default reward map and with one given by the caller."""
    src = sim_file(tmp_path / "s.jsonl", n=200)
    for rewards in (None, {"wasted": -1.0, "partial": 0.3}):
        out = tmp_path / f"out-{rewards is None}"
        export(
            seq_mem=src,
            output_dir=out,
            formats=["rl"],
            rewards=rewards,
            max_age_hours=BIG_AGE,
            val_percent=0,
            test_percent=0,
        )
        rl = [json.loads(x) for x in (out / "train.rl.jsonl").read_text().splitlines()]
        res = evaluate_policy(
            UNIFORM_SIM, seq_mem=src, rewards=rewards, max_age_hours=BIG_AGE, bootstrap=0
        )
        assert res["logging"]["value"] == pytest.approx(sum(r["reward"] for r in rl) / len(rl))
        assert res["counts"]["evaluated"] == len(rl)


UNIFORM_SIM = {"default": dict.fromkeys(simulate.router().tasks, 0.25)}


def test_the_logging_policy_itself_has_ess_n_and_ips_equal_to_its_mean(tmp_path) -> None:
    sim = simulate.router()
    src = sim_file(tmp_path / "s.jsonl", n=300)
    res = evaluate_policy(sim.table(sim.logging), seq_mem=src, max_age_hours=BIG_AGE)
    n = res["counts"]["evaluated"]
    assert n == 300
    assert res["effective_sample_size"] == n
    assert res["estimates"]["ips"]["value"] == pytest.approx(res["logging"]["value"], abs=1e-12)
    assert res["estimates"]["snips"]["value"] == pytest.approx(res["logging"]["value"], abs=1e-12)


def test_a_callable_sees_the_decision_as_the_router_saw_it(tmp_path) -> None:
    seen: list[dict[str, Any]] = []

    def policy(d: dict[str, Any]) -> dict[str, float]:
        seen.append(d)
        return {"a": 1.0} if d["context"]["kind"] == "x" else {"b": 1.0}

    res = evaluate_rows(tmp_path, [(0.5, "success"), (0.25, "failure")], policy=policy)
    assert res["policy"]["kind"] == "callable"
    assert [d["decision_id"] for d in seen] == ["d0", "d1"]
    assert set(seen[0]) == set(DECISION_FIELDS)  # never chosen_task, propensity or outcome
    assert res["estimates"]["ips"]["value"] == pytest.approx((1 / 0.5 * 1 + 1 / 0.25 * 0) / 2)


def test_nothing_to_estimate_is_a_failed_result_not_an_error(tmp_path) -> None:
    res = evaluate_rows(tmp_path, [(..., "success"), ("bad", "failure")])
    assert res["pass"] is False and res["estimates"]["dr"] is None
    assert "none of the 2 decisions" in res["note"] and "1 missing, 1 invalid" in res["note"]


def test_the_coverage_gate(tmp_path) -> None:
    pairs = [(0.5, "success"), (0.5, "failure"), (..., "success"), (..., "partial")]
    ok = evaluate_rows(tmp_path, pairs, min_propensity_coverage=0.5, bootstrap=0)
    assert ok["gates"]["min_propensity_coverage"] == {"actual": 0.5, "threshold": 0.5, "pass": True}
    assert ok["pass"] is True
    low = evaluate_rows(tmp_path, pairs, min_propensity_coverage=0.75, bootstrap=0)
    assert low["gates"]["min_propensity_coverage"]["pass"] is False and low["pass"] is False
    assert low["estimates"]["ips"]["value"] is not None  # the estimates are still reported


# -- policies ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.floats(-0.5, 1.5), min_size=1))
def test_a_distribution_is_accepted_exactly_when_it_is_one(probs: dict[str, float]) -> None:
    valid = all(v >= 0 for v in probs.values()) and abs(sum(probs.values()) - 1) <= 1e-6
    if valid:
        tasks, values = check_distribution(probs, where="t")
        assert dict(zip(tasks, values, strict=True)) == {k: v for k, v in probs.items() if v > 0}
    else:
        with pytest.raises(ValidationError) as info:
            check_distribution(probs, where="t")
        assert str(info.value).startswith("t: policy: ")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"default": {"a": 0.6, "b": 0.6}}, "default: policy: probabilities sum to 1.2"),
        ({"default": {"a": 1.5, "b": -0.5}}, "default: policy: probability of 'b' must be"),
        ({"default": {"a": "1"}}, "default: policy: probability of 'a' is not a number"),
        ({"default": {}}, "default: policy: names no task"),
        ({"default": [1]}, "default: policy: must be an object"),
        ({"key": "context.kind", "table": {"x": {"a": 0.9}}}, "table.x: policy: probabilities"),
        ({"key": "chosen_task", "table": {}}, "'chosen_task' does not start at a decision field"),
        ({"key": ["context.kind", "git_branch"], "table": {"x": {"a": 1.0}}}, "table.x.a"),
        ({"table": {"x": {"a": 1.0}}}, "has a table but no key"),
        ({"defualt": {"a": 1.0}}, "unknown field 'defualt'"),
        ({"schema_version": "v9", "default": {"a": 1.0}}, "schema_version 'v9'"),
        ({}, "has neither a table nor a default"),
    ],
)
def test_a_bad_table_is_refused_naming_where(table, message) -> None:
    with pytest.raises(ValidationError) as info:
        load_policy(table)
    assert message in str(info.value)


def test_unknown_tasks_and_unmatched_keys_are_errors_after_reading(tmp_path) -> None:
    with pytest.raises(ValidationError, match=r"table.x: policy: unknown task 'c'.*known: a, b"):
        evaluate_rows(
            tmp_path, [(0.5, "success")], policy={"key": "context.kind", "table": {"x": {"c": 1}}}
        )
    no_default = {"key": "context.kind", "table": {"y": {"a": 1.0}}}
    with pytest.raises(ValidationError, match=r"no entry for context.kind='x' \(decision 'd0'\)"):
        evaluate_rows(tmp_path, [(0.5, "success")], policy=no_default)

    def typo(d: dict[str, Any]) -> dict[str, float]:
        return {"aa": 1.0}

    with pytest.raises(ValidationError, match=r"typo, decision 'd0': policy: unknown task 'aa'"):
        evaluate_rows(tmp_path, [(0.5, "success")], policy=typo)


def test_a_failing_callable_is_reported_with_its_decision(tmp_path) -> None:
    def broken(d: dict[str, Any]) -> dict[str, float]:
        raise KeyError("ci_status")

    with pytest.raises(ValidationError, match=r"decision 'd0': policy: raised KeyError"):
        evaluate_rows(tmp_path, [(0.5, "success")], policy=broken)
    with pytest.raises(ValidationError, match=r"decision 'd0': policy: must be an object"):
        evaluate_rows(tmp_path, [(0.5, "success")], policy=lambda d: ["a"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuchmodule_xyz:route", "cannot import module 'nosuchmodule_xyz'"),
        ("json:no_such_function", "module 'json' has no attribute 'no_such_function'"),
        ("json:__doc__", "'json:__doc__' is not callable"),
        ("not a policy", "neither a JSON table file that exists nor module:function"),
    ],
)
def test_a_bad_policy_spec_is_a_clear_error(spec, message) -> None:
    with pytest.raises(ValidationError, match=message):
        load_policy(spec)


# -- the command line ----------------------------------------------------------------------


def test_cli_text_json_and_the_gate(tmp_path) -> None:
    src = sim_file(tmp_path / "s.jsonl", n=200)
    sim = simulate.router()
    policy = tmp_path / "candidate.json"
    policy.write_text(json.dumps(sim.table(simulate.CANDIDATE)))
    base = ["signal", "evaluate", "--policy", str(policy), "--seq-mem", str(src)]
    base += ["--max-age-hours", str(BIG_AGE), "--bootstrap", "100"]
    r = run_plaudit(*base)
    assert r.returncode == 0, r.stderr
    assert "Off-policy evaluation of" in r.stdout and "dr " in r.stdout
    r = run_plaudit(*base, "--json")
    body = json.loads(r.stdout)
    assert body["counts"]["evaluated"] == 200 and body["pass"] is True
    assert body["estimates"]["dr"]["ci"][0] <= body["estimates"]["dr"]["value"]

    missing = tmp_path / "missing.jsonl"
    write_rows(missing, [decision("d0", T0), outcome("d0", T0 + 1)])
    policy.write_text(json.dumps(UNIFORM))
    r = run_plaudit(
        "signal", "evaluate", "--policy", str(policy), "--seq-mem", str(missing),
        "--max-age-hours", str(BIG_AGE), "--min-propensity-coverage", "0.5",
    )  # fmt: skip
    assert r.returncode == 1
    assert "fail min_propensity_coverage: actual=0.0 threshold=0.5" in r.stderr
    assert "none of the 1 decisions" in r.stderr


def test_cli_imports_a_policy_module_from_the_current_directory(tmp_path) -> None:
    (tmp_path / "my_router_policy.py").write_text(
        "def route(decision):\n"
        "    ci = decision['context']['ci_status']\n"
        "    return {'ai:flow/fix-ci': 1.0} if ci == 'failing' else {'ai:flow/test': 1.0}\n"
    )
    src = sim_file(tmp_path / "s.jsonl", n=100)
    r = run_plaudit(
        "signal", "evaluate", "--policy", "my_router_policy:route", "--seq-mem", str(src),
        "--max-age-hours", str(BIG_AGE), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["policy"] == {
        "kind": "callable",
        "name": "my_router_policy:route",
        "key": [],
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "{policy}", "--default-propensity", "0"], "default_propensity: must be"),
        (["--policy", "{policy}", "--min-propensity-coverage", "2"], "min_propensity_coverage"),
        (["--policy", "{policy}", "--bootstrap", "1"], "bootstrap: one resample"),
        (["--policy", "{policy}", "--reward-key", "outcome"], "reward_key: 'outcome' does not"),
        (["--policy", "nosuch_mod_q:f"], "policy: cannot import module 'nosuch_mod_q'"),
        (["--policy", "{bad}"], "bad.json: default: policy: probabilities sum to 2"),
        (["--policy", "{policy}", "--seq-mem", "{dir}/none.jsonl"], "none.jsonl"),
        (["--policy", "{policy}", "--db", "{dir}/none.db"], "no plaudit store at"),
        (["--policy", "{policy}", "--reward", "great=1"], "rewards.great: unknown outcome"),
    ],
)
def test_cli_bad_input_exits_2_naming_it(tmp_path, args, message) -> None:
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(UNIFORM))
    (tmp_path / "bad.json").write_text(json.dumps({"default": {"a": 1, "b": 1}}))
    src = write_rows(tmp_path / "s.jsonl", [decision("d0", T0, propensity=0.5)])
    filled = [a.format(policy=policy, bad=tmp_path / "bad.json", dir=tmp_path) for a in args]
    if "--seq-mem" not in filled and "--db" not in filled:
        filled += ["--seq-mem", str(src)]
    r = run_plaudit("signal", "evaluate", *filled)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "none.db").exists()


def test_a_table_can_come_from_stdin(tmp_path, monkeypatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(UNIFORM).encode())))
    policy = load_policy("-")
    assert policy.kind == "table" and policy.name == "stdin"
    res = evaluate_rows(tmp_path, [(0.5, "success")], policy=policy, bootstrap=0)
    assert res["estimates"]["ips"]["value"] == pytest.approx(1.0)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"default": {"a": 2}}')))
    with pytest.raises(ValidationError, match=r"^stdin: default: policy: probabilities sum to 2"):
        load_policy("-")

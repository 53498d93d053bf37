"""OpenTelemetry export: the mapping, the cursor, delivery failures, the missing extra, OTLP over
HTTP to a real (in-test) collector, and `plaudit serve --otel`. Through the SDK's in-memory
exporter wherever a collector is not the point."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit import ConfigError, Plaudit, StoredEvent
from plaudit.bandit.projection import compact_rewards, rewards_of
from plaudit.cli import main
from plaudit.otel.mapping import EVALUATION_EVENT, TYPES, records

pytest.importorskip("opentelemetry.sdk._logs", reason="needs the otel extra")

from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
)

import _otlp
from plaudit.otel import OtelExporter

REPO = Path(__file__).resolve().parents[2]
ARMS = [{"id": "tool:a:one", "tokens": 100}, {"id": "skill:a:two", "tokens": 200}]


def fill(p: Plaudit, n: int = 1, prefix: str = "d") -> None:
    """n of each result kind, with unrelated events between them."""
    for i in range(n):
        p.ledger.record("validation_failure", f"broke the build {i}")
        p.log.append({"type": "test.noise.v1", "payload": {"i": i}})
        sel = p.bandit.select(ARMS, token_budget=1000, seed=i)
        p.bandit.observe(sel.run_id, "called tool:a:one", [])
        p.signals.decision(
            decision_id=f"{prefix}{i}",
            chosen_task="ai:flow/test",
            confidence=0.8,
            user_intent="run the tests",
            session_id="s1",
        )
        p.signals.outcome(
            decision_id=f"{prefix}{i}", outcome="success", task_executed="ai:flow/test"
        )


def sent(mem: InMemoryLogRecordExporter) -> list[dict[str, Any]]:
    return [dict(r.log_record.attributes or {}) for r in mem.get_finished_logs()]


def results_in_log(p: Plaudit) -> int:
    return sum(len(records(e)) for e in p.log.replay(types=TYPES))


# -- mapping ---------------------------------------------------------------------------------


def test_each_result_becomes_a_genai_evaluation_event(pl: Plaudit) -> None:
    fill(pl)
    mem = InMemoryLogRecordExporter()
    exporter = OtelExporter(pl, exporter=mem)
    report = exporter.export_pending()
    exporter.close()
    logs = mem.get_finished_logs()
    assert report.delivered and report.records == len(logs) == 4  # 1 + 2 arms + 1
    assert {r.log_record.event_name for r in logs} == {EVALUATION_EVENT}
    assert all(r.resource.attributes["service.name"] == "plaudit" for r in logs)
    assert all(r.instrumentation_scope.name == "plaudit" for r in logs)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for attrs in sent(mem):
        by_name.setdefault(str(attrs["gen_ai.evaluation.name"]), []).append(attrs)

    (ledger,) = by_name["plaudit.ledger.validation_failure"]
    assert ledger["gen_ai.evaluation.score.value"] == -20.0
    assert ledger["gen_ai.evaluation.score.label"] == "penalty"
    assert ledger["gen_ai.evaluation.explanation"] == "broke the build 0"
    assert ledger["plaudit.ledger.running_total"] == -20
    tx = pl.log.tail(1, types=["plaudit.ledger.transaction.v1"])[0]
    assert ledger["plaudit.event.id"] == tx.id and ledger["plaudit.event.seq"] == tx.seq

    arms = by_name["plaudit.bandit.arm_referenced"]
    obs = pl.log.tail(1, types=["plaudit.bandit.observation.v1"])[0]
    assert {a["plaudit.bandit.arm.id"]: a["gen_ai.evaluation.score.value"] for a in arms} == {
        arm: float(v) for arm, v in rewards_of(obs.payload).items()
    }
    assert all(a["plaudit.bandit.run.id"] == obs.payload["run_id"] for a in arms)
    assert {a["gen_ai.evaluation.score.label"] for a in arms} <= {"referenced", "not_referenced"}

    (router,) = by_name["plaudit.router.outcome"]
    assert router["gen_ai.evaluation.score.label"] == "success"
    assert router["gen_ai.evaluation.score.value"] == 1.0
    assert router["plaudit.router.decision_id"] == "d0"
    # Event time is when plaudit recorded the result, not when it was exported.
    assert logs[0].log_record.timestamp == tx.ts_ms * 1_000_000


payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    type_=st.sampled_from([*TYPES, "test.other.v1"]),
    payload=st.dictionaries(
        st.sampled_from(
            [
                *("category", "points", "type", "action", "rewards", "run_id", "outcome"),
                *("session", "arms", "hits"),
            ]
        ),
        payloads,
    )
    | payloads,
    session=st.text(max_size=20),
)
def test_any_payload_maps_to_valid_attributes(type_: str, payload: Any, session: str) -> None:
    """Whatever an event holds, the mapping never raises and never sends a value OTel refuses."""
    event = StoredEvent(
        id="e1", type=type_, ts_ms=1, payload=payload, session_id=session or "s", source="t", seq=1
    )
    for record in records(event):
        assert record.name == EVALUATION_EVENT
        assert "gen_ai.evaluation.name" in record.attributes
        for key, value in record.attributes.items():
            assert isinstance(value, str | bool | int | float), (key, value)
            assert not isinstance(value, str) or len(value) <= 4096
    if type_ == "test.other.v1":
        assert records(event) == []


def test_an_observations_rewards_map_alike_in_either_form() -> None:
    """An observation recorded with rewards by id (older versions) and one recorded in the
    compact form (`arms` and `hits`) give the same telemetry."""
    rewards = {"tool:exec:Bash": 1, "file:ws:a.md": 0, "skill:dev:main": 1}
    base = {"run_id": "r1", "context": "code", "updates": True}
    old = {**base, "rewards": rewards}
    new = {**base, **compact_rewards(list(rewards), "101")}

    def mapped(payload: dict[str, Any]) -> list[Any]:
        ev = StoredEvent(
            id="obs:r1",
            type="plaudit.bandit.observation.v1",
            ts_ms=1,
            payload=payload,
            session_id="s",
            source="bandit",
            seq=1,
        )
        return [r.attributes for r in records(ev)]

    assert mapped(new) == mapped(old) and len(mapped(old)) == 3


# -- the cursor ----------------------------------------------------------------------------------


def test_each_result_is_sent_once_across_rounds_batches_and_restarts(pl: Plaudit) -> None:
    fill(pl, 3)
    mem = InMemoryLogRecordExporter()
    first = OtelExporter(pl, exporter=mem, batch_size=2)
    assert first.export_pending().records == results_in_log(pl) == 12
    assert first.export_pending().records == 0
    first.close()

    fill(pl, 2, prefix="later")  # written while no exporter ran
    mem2 = InMemoryLogRecordExporter()
    again = OtelExporter(pl, exporter=mem2, batch_size=3)  # a restart: the cursor is in the store
    report = again.export_pending()
    again.close()
    assert report.records == 8 and report.cursor == pl.log.head().length
    ids = [a["plaudit.event.id"] for a in sent(mem) + sent(mem2)]
    assert len(set(ids)) == 3 * 3 + 2 * 3  # every result event, each in exactly one round
    seqs = [a["plaudit.event.seq"] for a in sent(mem2)]
    assert seqs == sorted(seqs)  # in log order


def test_a_new_cursor_can_start_at_the_head_and_names_are_independent(pl: Plaudit) -> None:
    fill(pl, 2)
    mem = InMemoryLogRecordExporter()
    head_only = OtelExporter(pl, exporter=mem, name="live", start="head")
    assert head_only.export_pending().records == 0
    fill(pl, 1, prefix="new")
    assert head_only.export_pending().records == 4
    head_only.close()
    other = InMemoryLogRecordExporter()
    backfill = OtelExporter(pl, exporter=other, name="archive")
    assert backfill.export_pending().records == 12
    backfill.close()


class Flaky(InMemoryLogRecordExporter):
    """Refuses every batch while `down` is set, as an unreachable collector does."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def export(self, batch):  # type: ignore[no-untyped-def]
        if self.down:
            return LogRecordExportResult.FAILURE
        return super().export(batch)


def test_an_undelivered_batch_keeps_the_cursor_and_is_sent_again(pl: Plaudit) -> None:
    fill(pl, 2)
    flaky = Flaky()
    exporter = OtelExporter(pl, exporter=flaky, batch_size=3)
    report = exporter.export_pending()
    assert not report.delivered and report.cursor == 0 and report.events == 0
    assert exporter.position() == 0
    flaky.down = False
    report = exporter.export_pending()
    exporter.close()
    assert report.delivered and report.cursor == pl.log.head().length
    ids = [a["plaudit.event.id"] for a in sent(flaky)]
    assert len(ids) == results_in_log(pl) == 8


def test_bad_settings_are_config_errors(pl: Plaudit, monkeypatch) -> None:
    for kwargs in ({"name": ""}, {"start": "middle"}, {"batch_size": 0}):
        with pytest.raises(ConfigError):
            OtelExporter(pl, exporter=InMemoryLogRecordExporter(), **kwargs)  # type: ignore[arg-type]
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "zipkin")
    with pytest.raises(ConfigError, match="OTEL_LOGS_EXPORTER='zipkin'"):
        OtelExporter(pl)
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with pytest.raises(ConfigError, match="carrier-pigeon"):
        OtelExporter(pl)


# -- the missing extra ------------------------------------------------------------------------


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    """Run in a fresh interpreter where what the extra installs (the SDK and the exporter)
    cannot be imported; the API may be there, brought by another package."""
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith(('opentelemetry.sdk', 'opentelemetry.exporter')):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from plaudit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for args in (["otel", "export"], ["serve", "--otel", "--port", "1"]):
        proc = subprocess.run(
            [sys.executable, "-c", blocker, "--db", str(tmp_path / "x.db"), *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "error: OpenTelemetry export needs the 'otel' extra, which is not installed: "
            "pip install 'plaudit[otel]'"
        ]
    assert not (tmp_path / "x.db").exists()


# -- OTLP over HTTP, configured by the standard variables ------------------------------------


@pytest.fixture
def collector() -> Iterator[str]:
    yield from _otlp.running_collector()


def test_otlp_http_goes_where_the_otel_variables_say(
    sqlite_url: str, collector: str, monkeypatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agent-feedback")
    monkeypatch.delenv("OTEL_LOGS_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    with Plaudit.open(sqlite_url) as p:
        fill(p)
        assert main(["--db", sqlite_url, "otel", "export"]) == 0
        assert main(["--db", sqlite_url, "otel", "export"]) == 0  # nothing new: nothing sent
    got = _otlp.decoded()
    assert len(got) == 4
    assert {path for path, _, _ in got} == {"/v1/logs"}
    assert {service for _, service, _ in got} == {"agent-feedback"}
    assert {attrs["event"] for _, _, attrs in got} == {EVALUATION_EVENT}
    names = sorted(attrs["gen_ai.evaluation.name"].string_value for _, _, attrs in got)
    assert names == [
        "plaudit.bandit.arm_referenced",
        "plaudit.bandit.arm_referenced",
        "plaudit.ledger.validation_failure",
        "plaudit.router.outcome",
    ]


def test_an_unreachable_collector_fails_the_command_and_keeps_the_cursor(
    sqlite_url: str, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    with Plaudit.open(sqlite_url) as p:
        fill(p)
    assert main(["--db", sqlite_url, "otel", "export"]) == 1
    assert "did not deliver" in capsys.readouterr().err
    assert main(["--db", sqlite_url, "otel", "status", "--json"]) == 0
    assert '"waiting":3' in capsys.readouterr().out

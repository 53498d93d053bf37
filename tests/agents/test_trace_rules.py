"""Which run a span belongs to and when the run ends, through `plaudit.traces.ingest_spans`:
selects made under an instrumented HTTP client's span, several runs in one trace, spans across
exports, and a hypothesis check that however a run's spans are split into exports, it is
observed once, with all of them."""

from __future__ import annotations

import itertools
import json
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit import Plaudit
from plaudit.tracecontext import trace_context
from plaudit.traces import Span, ingest_spans

ARMS = [
    {"id": "tool:exec:Bash", "tokens": 10},
    {"id": "file:workspace:README.md", "tokens": 10},
    {"id": "skill:web:search", "tokens": 10},
]
TRACE = "ab" * 16
CLIENT, INTERNAL = 3, 1
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash"}


def span(span_id: str, parent: str, start_ms: int, *, kind: int = INTERNAL, **attrs) -> Span:
    return Span(TRACE, span_id, parent, "s", kind, start_ms * 10**6, start_ms * 10**6 + 10**6,
                None, attrs)  # fmt: skip


def chat(span_id: str, parent: str, start_ms: int, text: str, *calls: str) -> Span:
    parts = [{"type": "text", "content": text}]
    parts += [{"type": "tool_call", "name": name} for name in calls]
    messages = json.dumps([{"role": "assistant", "parts": parts}])
    return span(span_id, parent, start_ms, **{
        "gen_ai.operation.name": "chat", "gen_ai.output.messages": messages,
    })  # fmt: skip


def select(p: Plaudit, span_id: str) -> tuple[str, int]:
    with trace_context(f"00-{TRACE}-{span_id}-01"):
        sel = p.bandit.select(ARMS, token_budget=100, seed=1)
    return sel.run_id, p.log.get(sel.run_id).ts_ms


def rewards(p: Plaudit, run_id: str) -> dict[str, int] | None:
    obs = p.bandit.run(run_id)["observation"]
    return None if obs is None else obs["rewards"]


def test_a_select_made_by_an_http_client_ends_with_the_clients_parent(pl: Plaudit) -> None:
    agent, client = "a1" * 8, "c1" * 8
    run_id, at = select(pl, client)  # the header named the HTTP client's span
    first = [span(client, agent, at, kind=CLIENT), chat("d1" * 8, agent, at + 5, "see README.md")]
    report = ingest_spans(pl, first)
    assert (report.pending, rewards(pl, run_id)) == (2, None)
    second = [chat("d2" * 8, agent, at + 9, "ran it", "Bash"), span(agent, "", at - 1)]
    report = ingest_spans(pl, second)
    assert report.runs_observed == [run_id]
    assert rewards(pl, run_id) == {
        "file:workspace:README.md": 1,
        "skill:web:search": 0,
        "tool:exec:Bash": 1,
    }
    assert ingest_spans(pl, second).late == 2  # resent: nothing new


def test_runs_selected_one_after_another_in_one_trace_get_their_own_spans(pl: Plaudit) -> None:
    one, at_one = select(pl, "e1" * 8)
    time.sleep(0.01)
    two, at_two = select(pl, "e2" * 8)
    spans = [
        chat("f1" * 8, "e1" * 8, at_one + 1, "ran it", "Bash"),
        span("e1" * 8, "", at_one),
        chat("f2" * 8, "e2" * 8, at_two + 1, "searched with skill:web:search"),
        span("e2" * 8, "", at_two),
    ]
    report = ingest_spans(pl, spans)
    assert sorted(report.runs_observed) == sorted([one, two])
    assert rewards(pl, one)["tool:exec:Bash"] == 1
    assert rewards(pl, one)["skill:web:search"] == 0
    assert rewards(pl, two)["skill:web:search"] == 1
    assert rewards(pl, two)["tool:exec:Bash"] == 0


@given(cuts=st.lists(st.integers(0, 4), max_size=4))
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_however_the_spans_are_split_the_run_is_observed_once_with_all(
    tmp_path_factory, cuts: list[int]
) -> None:
    with Plaudit.open(tmp_path_factory.mktemp("split") / "p.db", durability="normal") as p:
        root = "9a" * 8
        run_id, at = select(p, root)
        spans = [
            chat("1a" * 8, root, at + 1, "read README.md"),
            span("2a" * 8, root, at + 2, **TOOL),
            chat("3a" * 8, root, at + 3, "done"),
            span(root, "", at),  # ends the run: exported last, as the SDK does
        ]
        bounds = sorted({0, *cuts, 4})
        for lo, hi in itertools.pairwise(bounds):
            ingest_spans(p, spans[lo:hi])
        assert rewards(p, run_id) == {
            "file:workspace:README.md": 1,
            "skill:web:search": 0,
            "tool:exec:Bash": 1,
        }
        assert ingest_spans(p, spans).late == 4

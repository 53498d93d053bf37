"""Regenerate compat.jsonl, the fixture the compatibility test shares with the reference exporter.

    python tests/signals/data/make_compat.py > tests/signals/data/compat.jsonl
    python router_signal_export.py --seq-mem tests/signals/data/compat.jsonl \\
        --output-dir OUT --max-age-hours 1000000 [--seed S --val-percent V ...]

then copy the reference summary's counts, quality, distributions into compat_expected.json.
(router_signal_export.py is the reference tool from github.com/nikivdev/seq, tools/.)
"""

from __future__ import annotations

import json
import sys

from plaudit.signals import synth

START = 1_780_000_000_000


def edge_rows() -> list[str]:
    """Valid JSON lines that exercise the reference's corner rules."""

    def row(name: str, subject: object, ts: object = START + 5_000_000, session: str = "s-e"):
        return json.dumps(
            {"ts_ms": ts, "session_id": session, "name": name, "subject": subject, "ok": True}
        )

    dec = "flow.router.decision.v1"
    out = "flow.router.outcome.v1"
    ovr = "flow.router.override.v1"
    base = {"chosen_task": "ai:flow/test", "confidence": 0.5, "user_intent": "x"}
    return [
        # subject as an object instead of a JSON string
        row(dec, {"decision_id": "e-obj", **base}),
        row(out, {"decision_id": "e-obj", "outcome": "success", "task_executed": "ai:flow/test"}),
        # ts_ms as a numeric string (the reference accepts int("..."))
        row(dec, json.dumps({"decision_id": "e-str", **base}), ts=str(START + 6_000_000)),
        row(out, json.dumps({"decision_id": "e-str", "outcome": "partial"})),
        # a subject that is not JSON, a missing decision id, a zero timestamp: ignored
        row(dec, "not json at all"),
        row(dec, json.dumps({"chosen_task": "ai:flow/test"})),
        row(dec, json.dumps({"decision_id": "e-zero", **base}), ts=0),
        # a decision without chosen_task but with an outcome: skipped, not counted
        row(dec, json.dumps({"decision_id": "e-nochosen", "confidence": 0.3})),
        row(out, json.dumps({"decision_id": "e-nochosen", "outcome": "failure"})),
        # an outcome and an override for a decision that never came
        row(out, json.dumps({"decision_id": "e-orphan", "outcome": "wasted"})),
        row(ovr, json.dumps({"decision_id": "e-orphan", "override_task": "ai:flow/x"})),
        # the same decision twice with different content (last one wins) and two outcomes
        row(dec, json.dumps({"decision_id": "e-dup", **base})),
        row(dec, json.dumps({"decision_id": "e-dup", **base, "chosen_task": "ai:flow/review"})),
        row(out, json.dumps({"decision_id": "e-dup", "outcome": "failure"})),
        row(out, json.dumps({"decision_id": "e-dup", "outcome": "wasted"})),
        # two overrides: the last one is used when the outcome names none
        row(dec, json.dumps({"decision_id": "e-ovr", **base})),
        row(ovr, json.dumps({"decision_id": "e-ovr", "override_task": "ai:flow/first"})),
        row(ovr, json.dumps({"decision_id": "e-ovr", "override_task": "ai:flow/last"})),
        row(out, json.dumps({"decision_id": "e-ovr", "outcome": "partial"})),
        # an event type the exporter does not know
        row("cli.open_app_toggle.v1", json.dumps({"decision_id": "e-obj"})),
        "",
        "   ",
    ]


def main() -> None:
    lines = [
        json.dumps(r, ensure_ascii=True, sort_keys=True)
        for r in synth.rows(
            150, seed=11, start_ms=START, sessions=12, repeat_rate=0.05, override_rate=0.12
        )
    ]
    lines[100:100] = edge_rows()
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

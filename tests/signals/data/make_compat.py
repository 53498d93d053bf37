"""Regenerate compat.jsonl, the fixture the compatibility test shares with the reference exporter.

    python tests/signals/data/make_compat.py > tests/signals/data/compat.jsonl
    python router_signal_export.py --seq-mem tests/signals/data/compat.jsonl \\
        --output-dir OUT --max-age-hours 1000000 [--seed S --val-percent V ...]

then copy the reference summary's counts, quality, distributions into compat_expected.json.
(router_signal_export.py is the reference tool from github.com/nikivdev/seq, tools/.)

    python tests/signals/data/make_compat.py --lenient > tests/signals/data/lenient.jsonl

writes the lines that strict JSON refuses but the reference reads (NaN, Infinity, bytes that
are not UTF-8, lone surrogates, a form feed before the object); its expected figures, from the
reference in the same way, are under "lenient" in compat_expected.json.
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


def lenient_lines() -> list[bytes]:
    """Lines Python's json (and so the reference) reads but strict JSON parsers refuse."""
    dec = "flow.router.decision.v1"
    out = "flow.router.outcome.v1"
    ts = START + 7_000_000

    def line(name: str, subject: dict[str, object], session: str = "s-l", **extra: object) -> str:
        row = {"ts_ms": ts, "session_id": session, "name": name, "ok": True, **extra}
        if name == dec:
            subject = {"user_intent": f"intent for {subject['decision_id']}", **subject}
        row["subject"] = json.dumps(subject)  # NaN and Infinity as Python's json writes them
        return json.dumps(row)

    def outcome(did: str, result: str = "success") -> bytes:
        return line(out, {"decision_id": did, "outcome": result, "task_executed": "t"}).encode()

    # Each decision's intent differs, so no two rows share content (plaudit drops such rows).
    base = {"chosen_task": "ai:flow/test"}
    return [
        # NaN and infinities inside the subject, and in the outer row
        line(dec, {"decision_id": "l-nan", **base, "confidence": float("nan")}).encode(),
        outcome("l-nan"),
        line(dec, {"decision_id": "l-inf", **base, "context": {"load": float("inf")}}).encode(),
        outcome("l-inf", "partial"),
        line(dec, {"decision_id": "l-outer", **base}, dur_us=float("-inf")).encode(),
        outcome("l-outer", "failure"),
        # a decision id and an outcome given as NaN: the reference makes them "nan"
        line(dec, {"decision_id": float("nan"), **base}).encode(),
        outcome("nan", float("nan")),  # type: ignore[arg-type]
        # a byte that is not UTF-8 inside the subject (the reference replaces it)
        line(dec, {"decision_id": "l-latin1", **base, "user_intent": "caf\u00e9"})
        .encode()
        .replace(b"caf\\\\u00e9", b"caf\xe9"),
        outcome("l-latin1"),
        # a lone surrogate escape in the subject, and one in the outer row's session
        line(dec, {"decision_id": "l-sur", **base, "user_intent": "\ud800"}).encode(),
        outcome("l-sur"),
        line(dec, {"decision_id": "l-sur-row", **base}, session="s-\ud800").encode(),
        outcome("l-sur-row", "wasted"),
        # a form feed before the object (the reference strips it)
        b"\x0c" + line(dec, {"decision_id": "l-ff", **base}).encode(),
        outcome("l-ff"),
        # a row-level session id of NaN: str() makes it "nan" there
        line(dec, {"decision_id": "l-nan-session", **base}, session=float("nan")).encode(),
        outcome("l-nan-session"),
        # records separated by a CR, as str.splitlines separates them; a line of Unicode spaces
        line(dec, {"decision_id": "l-cr-1", **base}).encode()
        + b"\r"
        + line(dec, {"decision_id": "l-cr-2", **base}).encode(),
        outcome("l-cr-1") + b"\r" + outcome("l-cr-2"),
        "\u00a0\u3000".encode(),
        # subjects Python's json cannot read for other reasons than syntax: parse errors there
        _with_member(line(dec, {"decision_id": "l-deep", **base}), "[" * 1200 + "]" * 1200),
        outcome("l-deep"),
        _with_member(line(dec, {"decision_id": "l-digits", **base}), "7" * 4301),
        outcome("l-digits"),
    ]


def _with_member(line: str, raw: str) -> bytes:
    """`line` with `"x": raw` added at the end of its subject (the row's last member)."""
    assert line.endswith('}"}')
    return (line[:-3] + ', \\"x\\": ' + raw + '}"}').encode()


def main() -> None:
    if "--lenient" in sys.argv[1:]:
        sys.stdout.buffer.write(b"\n".join(lenient_lines()) + b"\n")
        return
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

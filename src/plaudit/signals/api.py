"""`Plaudit.signals`: the router signal contract as a Python API."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plaudit.signals import contract
from plaudit.signals.emit import record

if TYPE_CHECKING:
    from plaudit.core import Plaudit
    from plaudit.signals.join import Progress

PathLike = str | os.PathLike[str]


class Signals:
    """Record router decisions, outcomes and overrides; export and audit them.

    Every emit is validated (the error names the field, nothing is written), `context` is
    redacted, and re-emitting the same event is acknowledged as `present`.
    """

    #: How long the log's summary is reused while the log has not changed (dashboard polls).
    SUMMARY_TTL_SECONDS = 30.0

    def __init__(self, plaudit: Plaudit) -> None:
        self.plaudit = plaudit
        self._summary_cache: tuple[tuple[Any, ...], float, dict[str, Any]] | None = None

    # -- emit ---------------------------------------------------------------------------
    def decision(
        self,
        decision_id: str,
        chosen_task: str,
        confidence: float,
        user_intent: str,
        *,
        session_id: str | None = None,
        candidates: Sequence[Any] | None = None,
        context: Mapping[str, Any] | None = None,
        project_fingerprint: str = "",
        project_path: str = "",
        git_branch: str = "",
        git_commit: str = "",
        user_hash: str = "",
        source: str = contract.DEFAULT_SOURCE,
        ts_ms: int | None = None,
        propensity: float | None = None,
        seq_mem: PathLike | None = None,
    ) -> dict[str, Any]:
        e = contract.build_decision(
            decision_id=decision_id,
            chosen_task=chosen_task,
            confidence=confidence,
            user_intent=user_intent,
            session_id=session_id,
            candidates=candidates,
            context=context,
            project_fingerprint=project_fingerprint,
            project_path=project_path,
            git_branch=git_branch,
            git_commit=git_commit,
            user_hash=user_hash,
            source=source,
            ts_ms=ts_ms,
            propensity=propensity,
        )
        return record(self.plaudit, e, seq_mem=seq_mem)

    def outcome(
        self,
        decision_id: str,
        outcome: str,
        task_executed: str,
        time_to_resolution_ms: int = 0,
        *,
        manual_override_task: str = "",
        error_kind: str = "",
        extra: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        source: str = contract.DEFAULT_SOURCE,
        ts_ms: int | None = None,
        seq_mem: PathLike | None = None,
    ) -> dict[str, Any]:
        e = contract.build_outcome(
            decision_id=decision_id,
            outcome=outcome,
            task_executed=task_executed,
            time_to_resolution_ms=time_to_resolution_ms,
            manual_override_task=manual_override_task,
            error_kind=error_kind,
            extra=extra,
            session_id=session_id,
            source=source,
            ts_ms=ts_ms,
        )
        return record(self.plaudit, e, seq_mem=seq_mem)

    def override(
        self,
        decision_id: str,
        original_task: str,
        override_task: str,
        *,
        reason: str = "",
        session_id: str | None = None,
        source: str = contract.DEFAULT_SOURCE,
        ts_ms: int | None = None,
        seq_mem: PathLike | None = None,
    ) -> dict[str, Any]:
        e = contract.build_override(
            decision_id=decision_id,
            original_task=original_task,
            override_task=override_task,
            reason=reason,
            session_id=session_id,
            source=source,
            ts_ms=ts_ms,
        )
        return record(self.plaudit, e, seq_mem=seq_mem)

    # -- export and audit ---------------------------------------------------------------
    def export(
        self,
        output_dir: PathLike | None,
        *,
        seq_mem: PathLike | None = None,
        seed: int = 42,
        val_percent: int = 10,
        test_percent: int = 10,
        history_size: int = 3,
        max_age_hours: int = 168,
        split_by: str = "decision",
        formats: Sequence[str] = ("jsonl",),
        rewards: Mapping[str, float] | None = None,
        now_ms: int | None = None,
        progress: Progress | None = None,
        allow_unverified: bool = False,
        reuse_from: PathLike | None = None,
    ) -> dict[str, Any]:
        """Export the log (or `seq_mem`, when given) to `output_dir`; returns summary.json's
        content. `output_dir=None` computes the summary without writing anything. A log that
        fails verification is refused (IntegrityError) unless `allow_unverified`.
        `reuse_from`: an earlier export's directory to copy unchanged rows from (only read)."""
        from plaudit.signals.export import export

        return export(
            plaudit=self.plaudit,
            seq_mem=seq_mem,
            output_dir=output_dir,
            seed=seed,
            val_percent=val_percent,
            test_percent=test_percent,
            history_size=history_size,
            max_age_hours=max_age_hours,
            split_by=split_by,
            formats=formats,
            rewards=rewards,
            now_ms=now_ms,
            progress=progress,
            allow_unverified=allow_unverified,
            reuse_from=reuse_from,
        )

    def summary(self, **options: Any) -> dict[str, Any]:
        """The export summary of the log, computed in memory (no files)."""
        return self.export(None, **options)

    def audit(
        self,
        summary: Mapping[str, Any] | PathLike | None = None,
        *,
        report_out: PathLike | None = None,
        write: bool = True,
        max_age_hours: int = 168,
        **limits: Any,
    ) -> dict[str, Any]:
        """Audit a summary (a mapping or a summary.json path; default: the log's own).

        `limits` are gate thresholds by gate name (min_decisions=..., max_split_leakage=...).
        """
        from plaudit.signals.audit import audit

        if summary is None:
            summary = self._log_summary(max_age_hours)
        return audit(summary, limits=limits, report_out=report_out, write=write)

    def _log_summary(self, max_age_hours: int) -> dict[str, Any]:
        """The log's summary, reused for a short while if the log has not changed since.

        Computing it replays every router event; a dashboard polling the gates every few
        seconds would otherwise redo that work on an idle log.
        """
        key = (self.plaudit.log.head().digest, max_age_hours)
        now = time.monotonic()
        cached = self._summary_cache
        if cached is not None and cached[0] == key and now - cached[1] < self.SUMMARY_TTL_SECONDS:
            return cached[2]
        summary = self.summary(max_age_hours=max_age_hours)
        self._summary_cache = (key, now, summary)
        return summary

    def evaluate(self, policy: Any, **options: Any) -> dict[str, Any]:
        """Off-policy estimate of what `policy` would have earned on the log's decisions
        (IPS, SNIPS, doubly robust); options as `plaudit.evaluate_policy`."""
        from plaudit.signals.evaluate import evaluate_policy

        return evaluate_policy(policy, plaudit=self.plaudit, **options)

    # -- the loop: learn, recommend (and shadow), compare ---------------------------------
    def learn(self, out: PathLike | None, **options: Any) -> dict[str, Any]:
        """Learn a routing policy from the log's decisions and write it to `out` (None: only
        returned, in `result["spec"]`); options as `plaudit.learn_policy`. Raises
        `plaudit.signals.learn.LearnRefused` when the audit's quality gates fail."""
        from plaudit.signals.learn import learn_policy

        return learn_policy(out, plaudit=self.plaudit, **options)

    def recommend(
        self,
        policy: Any,
        *,
        context: Mapping[str, Any] | None = None,
        candidates: Sequence[Any] | None = None,
        decision: Mapping[str, Any] | None = None,
        decision_id: str | None = None,
        session_id: str | None = None,
        greedy: bool = False,
        shadow: bool = False,
    ) -> dict[str, Any]:
        """The policy's probabilities for one decision and its pick (`plaudit.recommend`);
        with `shadow=True` it is also recorded beside the router's decision of the same id
        (`result["shadow"]`)."""
        from plaudit.signals.recommend import recommend, record_shadow

        if session_id is not None:
            decision = {**(decision or {}), "session_id": session_id}
        if shadow and decision_id is None:
            from plaudit.errors import ValidationError

            raise ValidationError("decision_id", "shadow mode records under the decision's id")
        result = recommend(
            policy,
            context=context,
            candidates=candidates,
            decision=decision,
            decision_id=decision_id,
            greedy=greedy,
        )
        if shadow:
            result["shadow"] = record_shadow(self.plaudit, result, session_id=session_id)
        return result

    def compare(self, policy: Any, **options: Any) -> dict[str, Any]:
        """The promotion gate: `policy` against the logging router on the decisions it did
        not learn from, and its shadow records; options as `plaudit.compare_policy`."""
        from plaudit.signals.compare import compare_policy

        return compare_policy(policy, plaudit=self.plaudit, **options)

    def gates(self, *, max_age_hours: int = 168, **limits: Any) -> dict[str, Any]:
        """The dashboard's view: the log's gates with default thresholds (env overrides apply);
        nothing is written."""
        from plaudit.signals.audit import gate_list

        report = self.audit(None, write=False, max_age_hours=max_age_hours, **limits)
        # `pass`, as in the audit report; `passed` is a deprecated alias for 0.1 clients.
        ok = report["pass"]
        return {"pass": ok, "passed": ok, "gates": gate_list(report["gates"])}

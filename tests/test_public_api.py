"""The public API: every exported name resolves, and the errors a caller must catch are there."""

from __future__ import annotations

import pytest

import plaudit
from plaudit import errors


def test_every_exported_name_resolves() -> None:
    for name in plaudit.__all__:
        assert getattr(plaudit, name) is not None, name


def test_every_error_class_is_exported() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.PlauditError)
    }
    assert defined <= set(plaudit.__all__)
    assert plaudit.StoreNotFoundError.exit_code == 2
    assert issubclass(plaudit.MissingExtraError, plaudit.ConfigError)


#: The public API. A change here is a change users see: add to it on purpose, never by accident,
#: and never remove a name without a deprecation (see CHANGELOG.md).
PINNED = {
    "AppendResult",
    "Arm",
    "ArmStats",
    "BackendUnavailableError",
    "BanditConfig",
    "BatchResult",
    "Checkpoint",
    "ConfigError",
    "ConflictError",
    "DeadlineError",
    "Event",
    "EventLog",
    "Head",
    "IntegrityError",
    "LearnRefused",
    "ListenError",
    "LogView",
    "MissingExtraError",
    "NotFoundError",
    "Observation",
    "Plaudit",
    "PlauditError",
    "Projection",
    "ProofReport",
    "Selection",
    "StoreNotFoundError",
    "StoredEvent",
    "TraceContext",
    "Tx",
    "ValidationError",
    "VerifyReport",
    "Writer",
    "__version__",
    "check_consistency",
    "check_proof",
    "compare_policy",
    "current_trace",
    "evaluate_policy",
    "learn_policy",
    "make_event",
    "recommend",
    "register_projection",
    "trace_context",
    "unregister_projection",
    "uuid7",
}

#: The methods of the main handles that the docs promise.
PINNED_METHODS = {
    "Plaudit": {"open", "close", "bandit", "ledger", "signals", "rebuild", "warm"},
    "EventLog": {
        "append",
        "append_batch",
        "enqueue",
        "enqueue_batch",
        "run",
        "writer",
        "reading",
        "sequence",
        "verify",
        "replay",
        "get",
        "tail",
        "head",
        "stats",
        "rebuild",
        "checkpoint",
        "prove",
        "consistency",
    },
}


def test_the_public_names_are_exactly_the_pinned_ones() -> None:
    assert set(plaudit.__all__) == PINNED
    assert sorted(dir(plaudit)) == sorted(PINNED)


def test_the_main_handles_keep_their_documented_methods(tmp_path) -> None:
    for cls_name, methods in PINNED_METHODS.items():
        cls = getattr(plaudit, cls_name)
        missing = {m for m in methods if not hasattr(cls, m)}
        assert not missing, f"{cls_name} lost {sorted(missing)}"
    with plaudit.Plaudit.open(tmp_path / "api.db") as p:
        assert isinstance(p.log, plaudit.EventLog)


def test_a_path_given_to_the_constructor_says_to_use_open(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"Plaudit\.open\("):
        plaudit.Plaudit(str(tmp_path / "x.db"))  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()

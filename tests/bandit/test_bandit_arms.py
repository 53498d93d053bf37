"""Arm ids, token costs and config validation: bad input gets an error naming what and where."""

from __future__ import annotations

import pytest

from plaudit.bandit import Arm, BanditConfig, coerce_arms, parse_arm_id
from plaudit.bandit.config import merged, validate_changes
from plaudit.errors import ValidationError


def test_parse_valid_ids() -> None:
    assert parse_arm_id("tool:exec:Bash") == ("tool", "exec", "Bash")
    assert parse_arm_id("file:workspace:src/a:b.py") == ("file", "workspace", "src/a:b.py")


@pytest.mark.parametrize(
    "bad",
    [
        "Bash",
        "tool:Bash",
        "tool::Bash",
        "widget:x:y",
        "tool:ex ec:Bash",
        "tool:exec:",
        5,
        None,
        "tool:exec:a\nb",
        "x" * 600,
    ],
)
def test_malformed_ids_are_rejected(bad: object) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_arm_id(bad)
    assert exc.value.field == "id"


def test_arm_rejects_negative_and_non_integer_costs() -> None:
    with pytest.raises(ValidationError, match="tokens: tool:exec:Bash: -1 is not between"):
        Arm(id="tool:exec:Bash", tokens=-1)
    with pytest.raises(ValidationError, match="must be an integer"):
        Arm(id="tool:exec:Bash", tokens=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must be an integer"):
        Arm(id="tool:exec:Bash", tokens=True)  # type: ignore[arg-type]


def test_kind_defaults_by_type() -> None:
    assert Arm(id="file:workspace:a.md", tokens=1).effective_kind == "learned"
    assert Arm(id="tool:exec:Bash", tokens=1).effective_kind == "curated"
    assert Arm(id="file:workspace:a.md", tokens=1, kind="curated").effective_kind == "curated"
    with pytest.raises(ValidationError, match="kind"):
        Arm(id="tool:exec:Bash", tokens=1, kind="magic")


def test_coerce_arms_names_the_position() -> None:
    with pytest.raises(ValidationError) as exc:
        coerce_arms([{"id": "tool:exec:Bash", "tokens": 1}, {"id": "tool:exec:Grep"}])
    assert exc.value.where == "arms[1]" and exc.value.field == "tokens"
    with pytest.raises(ValidationError, match="listed twice"):
        coerce_arms([{"id": "tool:exec:Bash", "tokens": 1}] * 2)
    with pytest.raises(ValidationError, match="unknown field"):
        coerce_arms([{"id": "tool:exec:Bash", "tokens": 1, "cost": 2}])
    with pytest.raises(ValidationError, match="must be a list"):
        coerce_arms("tool:exec:Bash")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must be an object"):
        coerce_arms([3])  # type: ignore[list-item]


def test_priors_per_kind_type_and_arm() -> None:
    cfg = BanditConfig()
    # the seed's means (0.75 curated, 0.5 learned) at a strength of one observation
    assert cfg.prior("tool:exec:Bash", "curated") == (0.75, 0.25)
    assert cfg.prior("file:workspace:a.md", "learned") == (0.5, 0.5)
    cfg = merged(cfg, {"type_priors": {"tool": [2, 2]}, "arm_priors": {"tool:web:*": [5, 1]}})
    assert cfg.prior("tool:exec:Bash", "curated") == (2.0, 2.0)
    assert cfg.prior("tool:web:WebSearch", "curated") == (5.0, 1.0)


def test_protection_by_id_and_glob() -> None:
    cfg = merged(BanditConfig(), {"protected": ["section:system:*", "tool:web:WebSearch"]})
    assert cfg.is_protected("section:system:instructions")
    assert cfg.is_protected("tool:web:WebSearch")
    assert not cfg.is_protected("tool:exec:Bash")


def test_baseline_rate_auto_follows_the_seed() -> None:
    cfg = merged(BanditConfig(), {"baseline_rate": "auto"})
    assert [cfg.rate_for(n) for n in (1, 10, 11, 50, 51)] == [0.2, 0.2, 0.1, 0.1, 0.05]
    assert BanditConfig().rate_for(3) == 0.0


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"phase": "sleeping"}, "phase"),
        ({"min_pulls": -1}, "min_pulls"),
        ({"baseline_rate": "sometimes"}, "baseline_rate"),
        ({"protected": "tool:exec:Bash"}, "protected"),
        ({"protected": ["Bash"]}, "id"),
        ({"type_priors": {"widget": [1, 1]}}, "type_priors.widget"),
        ({"arm_priors": {"tool:exec:Bash": [0, 1]}}, "arm_priors.tool:exec:Bash"),
        ({"colour": "red"}, "colour"),
        ({"update_on_error": "yes"}, "update_on_error"),
    ],
)
def test_bad_config_is_rejected(changes: dict, field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        validate_changes(changes)
    assert exc.value.field == field

"""Fuzz every mounted endpoint from the app's own OpenAPI spec: no input may produce a 5xx.

Each operation gets valid and invalid inputs (schemathesis' positive and negative modes) against
the in-process app, on both backends. Examples are derandomized so a failure reproduces.

schemathesis' own pytest integration (`parametrize`, `from_fixture`) does not run under
pytest 9, so the operations are parametrized here and each one's strategy is driven by
hypothesis directly.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode

from plaudit import Plaudit
from plaudit.server.app import create_app

warnings.filterwarnings("ignore", message=".*httpx2.*")

MAX_EXAMPLES = 30


def _operations() -> list[tuple[str, str, GenerationMode]]:
    """(method, path, mode) for every operation the app mounts now; the spec needs no data.
    Operations without inputs have no invalid input to generate, so they run positive only."""
    with Plaudit.open(":memory:") as p:
        spec = create_app(p).openapi()
    out = []
    for path, item in sorted(spec["paths"].items()):
        for method, op in sorted(item.items()):
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            out.append((method.upper(), path, GenerationMode.POSITIVE))
            if op.get("parameters") or op.get("requestBody"):
                out.append((method.upper(), path, GenerationMode.NEGATIVE))
    return out


OPERATIONS = _operations()


#: Body fields that name files on the server (signals export/audit). The fuzzer's values are
#: kept (odd characters included) but confined to a temporary directory.
PATH_FIELDS = ("output_dir", "seq_mem", "summary_path", "report_out")


@pytest.fixture
def app_schema(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[schemathesis.schemas.BaseSchema]:
    monkeypatch.chdir(tmp_path)  # relative paths land here
    p = Plaudit.open(db_url)
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", create_app(p))
    finally:
        p.close()


def _confine_paths(case: schemathesis.Case, root: Path) -> None:
    body = case.body
    if not isinstance(body, dict):
        return
    for key in PATH_FIELDS:
        value = body.get(key)
        if isinstance(value, str) and value:
            safe = value.replace("/", "_").replace("\\", "_").replace("..", "__")[:100]
            body[key] = str(root / "sandbox" / safe)


def _check(case: schemathesis.Case, root: Path) -> None:
    _confine_paths(case, root)
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error])
    if response.status_code >= 400:  # every error is JSON that says what was wrong
        body = response.json()
        assert isinstance(body, dict) and body.get("message"), response.text


@pytest.mark.parametrize(
    ("method", "path", "mode"), OPERATIONS, ids=[f"{m} {p} {g.value}" for m, p, g in OPERATIONS]
)
def test_no_input_produces_a_server_error(
    app_schema, tmp_path: Path, method: str, path: str, mode: GenerationMode
) -> None:
    operation = app_schema[path][method]

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        _check(case, tmp_path)

    try:
        run()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        # Every input this operation's schema can express is valid (e.g. a free-form string in
        # the path); the positive run covers it.


def test_the_fuzz_covers_the_log_routes() -> None:
    """Guards against an empty parametrization passing vacuously."""
    assert ("POST", "/v1/log/append", GenerationMode.NEGATIVE) in OPERATIONS
    assert ("GET", "/v1/log/verify", GenerationMode.POSITIVE) in OPERATIONS

"""docs/otel.md's traces-in snippet, as written, against a running `plaudit serve`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _snippets import snippet

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")


def test_the_traces_in_snippet_teaches_the_bandit(serve_factory, sqlite_url: str) -> None:
    served = serve_factory(sqlite_url)
    env = {**os.environ, "PLAUDIT_URL": served.url, "PLAUDIT_DB": sqlite_url}
    r = subprocess.run(
        [sys.executable, "-c", snippet("otel.md", "otel-traces-in")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "{'tool:exec:Bash': 0, 'file:workspace:README.md': 1}"

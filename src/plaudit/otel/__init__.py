"""OpenTelemetry export of the log's results (the `plaudit[otel]` extra).

`OtelExporter` follows committed ledger transactions, bandit observations and router outcomes
and emits them as GenAI `gen_ai.evaluation.result` events through the OpenTelemetry SDK. The
mapping (`plaudit.otel.mapping`) needs no extra; everything else imports the SDK when used and,
without it, fails with one line naming the extra.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "EXTRA_MESSAGE": "plaudit.otel.exporter",
    "ExportReport": "plaudit.otel.exporter",
    "Follower": "plaudit.otel.exporter",
    "OtelExporter": "plaudit.otel.exporter",
    "require_sdk": "plaudit.otel.exporter",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plaudit.otel' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)

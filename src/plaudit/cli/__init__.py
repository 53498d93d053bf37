"""The `plaudit` command: a thin layer over the library.

Subcommands live in their own modules and are imported only when called, so that a shell
hook running `plaudit signal emit` does not pay for numpy, the HTTP stack or rich.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

#: command name -> "module:attr" of a click command or group
COMMANDS: dict[str, str] = {
    "init": "plaudit.cli.log:init",
    "log": "plaudit.cli.log:log",
    "rebuild": "plaudit.cli.log:rebuild",
    "signal": "plaudit.cli.signal:signal",
    "arms": "plaudit.cli.bandit:arms",
    "select": "plaudit.cli.bandit:select",
    "observe": "plaudit.cli.bandit:observe",
    "posteriors": "plaudit.cli.bandit:posteriors",
    "savings": "plaudit.cli.bandit:savings",
    "bandit": "plaudit.cli.bandit:bandit",
    "ledger": "plaudit.cli.ledger:ledger",
    "serve": "plaudit.cli.serve:serve",
    "otel": "plaudit.cli.otel:otel",
    "mcp": "plaudit.cli.mcp:mcp",
    "ingest-traces": "plaudit.cli.traces:ingest_traces",
    "demo": "plaudit.cli.demo:demo",
    "doctor": "plaudit.cli.doctor:doctor",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # Fast path for shell hooks: `plaudit [--db X] [--seq-mem P] signal emit ...` skips click.
    if "signal" in args and "emit" in args and args.index("emit") == args.index("signal") + 1:
        try:
            from plaudit.cli.emit import main as emit_main
        except ImportError:
            pass
        else:
            return emit_main(args)
    from plaudit.cli._app import run

    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

__all__ = ["COMMANDS", "main"]

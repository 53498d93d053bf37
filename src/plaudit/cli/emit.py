"""`plaudit signal emit decision|outcome|override`: the shell-hook fast path.

`plaudit.cli.main` calls :func:`main` before click is imported, because hooks run this once per
routing event. It accepts the reference emitter's flags and defaults exactly, so a hook line
works by swapping the command name; it uses only argparse, msgspec and the store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from plaudit.errors import PlauditError, ValidationError

#: `typing` costs a shell hook ~10 ms to import; annotations here are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

USAGE_EXIT = 2
SEQ_MEM_ENV = "SEQ_CH_MEM_PATH"
#: Options the reference emitter does not have. An abbreviation that could mean one of these or
#: one of the reference's (`--d`: --decision-id or --db) means the reference's, as it did there.
PLAUDIT_ONLY = frozenset({"--db", "--seq-mem", "--no-log", "--traceparent"})


def _columns() -> int:
    """What `shutil.get_terminal_size` would say, without importing shutil (with bz2, lzma
    and fnmatch), which argparse's default formatter does for every parser it builds."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, **kwargs: Any) -> None:
        if kwargs.get("width") is None:
            kwargs["width"] = _columns() - 2
        super().__init__(prog, **kwargs)


class _Parser(argparse.ArgumentParser):
    """argparse that reports `error: ...` on one line, like the rest of the CLI."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def _get_option_tuples(self, option_string: str) -> list[Any]:
        found = super()._get_option_tuples(option_string)  # type: ignore[misc]
        if len(found) > 1:
            theirs = [t for t in found if not PLAUDIT_ONLY & set(t[0].option_strings)]
            if len(theirs) == 1:
                return theirs
        return found

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (in `{self.prog}`; see --help)\n")
        raise SystemExit(USAGE_EXIT)

    # A typo gets the names it may have meant, as the click commands answer one.
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(c) for c in choices]
            hint = _did_you_mean(str(value), names)
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r}{'.' + hint if hint else ''} "
                f"(choose from {', '.join(map(repr, names))})",
            )
        super()._check_value(action, value)  # type: ignore[misc]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """An unknown option is reported, with what it may have meant, before argparse
        reports the required options it then counts as missing."""
        if args is not None and self._subparsers is None:
            self._check_options(list(args))
        return super().parse_known_args(args, namespace)

    def _check_options(self, args: list[str]) -> None:
        skip = False
        for arg in args:
            if skip or arg == "--":
                skip = False
                if arg == "--":
                    return
                continue
            if not arg.startswith("--") or len(arg) < 3:
                continue
            name, eq, _ = arg.partition("=")
            action = self._option_string_actions.get(name)
            found = [] if action is not None else self._get_option_tuples(name)
            if action is None and len(found) == 1:
                action = found[0][0]
            if action is None and not found:
                known = [o for o in self._option_string_actions if o.startswith("--")]
                self.error(f"no such option: {name}.{_did_you_mean(name, known)}".rstrip("."))
            skip = action is not None and action.nargs != 0 and not eq


def _did_you_mean(word: str, names: list[str]) -> str:
    from difflib import get_close_matches

    close = get_close_matches(word, names, n=3)
    if len(close) == 1:
        return f" Did you mean {close[0]!r}?"
    if close:
        return f" Did you mean one of: {', '.join(map(repr, close))}?"
    return ""


def _globals(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On subcommands the defaults are suppressed so they do not erase values given earlier.
    default = None if top else argparse.SUPPRESS
    parser.add_argument("--db", default=default, metavar="PATH|DSN", help="SQLite path or DSN")
    parser.add_argument(
        "--seq-mem", default=default, metavar="PATH", help="also append the row to this file"
    )
    parser.add_argument(
        "--traceparent",
        default=default,
        metavar="W3C",
        help="W3C trace context for the event (default: $TRACEPARENT)",
    )
    parser.add_argument(
        "--no-log",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="only append to --seq-mem; do not open the event log",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="plaudit signal emit", description="Record a Flow router event (drop-in emitter)."
    )
    _globals(parser, top=True)
    sub = parser.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--session-id", default="")
        p.add_argument("--source", default="flow")
        p.add_argument("--ts-ms", type=int)
        _globals(p, top=False)

    d = sub.add_parser("decision", help="emit flow.router.decision.v1")
    d.add_argument("--decision-id", required=True)
    d.add_argument("--chosen-task", required=True)
    d.add_argument("--confidence", type=float, required=True)
    d.add_argument("--user-intent", default="")
    d.add_argument("--candidates-json", help="JSON list of candidate tasks/scores")
    d.add_argument("--context-json", help="JSON object with runtime context")
    d.add_argument("--project-fingerprint", default="")
    d.add_argument("--project-path", default="")
    d.add_argument("--git-branch", default="")
    d.add_argument("--git-commit", default="")
    d.add_argument("--user-hash", default="")
    d.add_argument("--propensity", type=float, help="probability the router picked this task")
    common(d)

    o = sub.add_parser("outcome", help="emit flow.router.outcome.v1")
    o.add_argument("--decision-id", required=True)
    o.add_argument("--outcome", required=True, choices=["success", "partial", "failure", "wasted"])
    o.add_argument("--task-executed", required=True)
    o.add_argument("--time-to-resolution-ms", type=int, default=0)
    o.add_argument("--manual-override-task", default="")
    o.add_argument("--error-kind", default="")
    o.add_argument("--extra-json", help="JSON object with extra metrics")
    common(o)

    v = sub.add_parser("override", help="emit flow.router.override.v1")
    v.add_argument("--decision-id", required=True)
    v.add_argument("--original-task", required=True)
    v.add_argument("--override-task", required=True)
    v.add_argument("--reason", default="")
    common(v)
    return parser


def _json_arg(flag: str, raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValidationError(flag, f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValidationError(flag, "is nested too deeply to read") from None


def split_argv(argv: Sequence[str]) -> list[str]:
    """Drop the program's own words: `[--db X] [--seq-mem P] signal emit ...` -> options."""
    args = list(argv)
    for i in range(len(args) - 1):
        if args[i] == "signal" and args[i + 1] == "emit":
            return args[:i] + args[i + 2 :]
    return args


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(split_argv(argv))
    traceparent = args.traceparent or os.environ.get("TRACEPARENT") or None
    if traceparent is None:
        return _run(args, traced=False)
    from plaudit.tracecontext import trace_context

    field = "--traceparent" if args.traceparent else "$TRACEPARENT"
    with trace_context(traceparent, field=field):
        return _run(args, traced=True)


def _run(args: Any, *, traced: bool) -> int:
    from plaudit.signals import contract

    where = f"plaudit signal emit {args.cmd}"
    if args.cmd == "decision":
        emission = contract.build_decision(
            decision_id=args.decision_id,
            chosen_task=args.chosen_task,
            confidence=args.confidence,
            user_intent=args.user_intent,
            session_id=args.session_id,
            candidates=_json_arg("--candidates-json", args.candidates_json),
            context=_json_arg("--context-json", args.context_json),
            project_fingerprint=args.project_fingerprint,
            project_path=args.project_path,
            git_branch=args.git_branch,
            git_commit=args.git_commit,
            user_hash=args.user_hash,
            source=args.source,
            ts_ms=args.ts_ms,
            propensity=args.propensity,
            where=where,
        )
    elif args.cmd == "outcome":
        emission = contract.build_outcome(
            decision_id=args.decision_id,
            outcome=args.outcome,
            task_executed=args.task_executed,
            time_to_resolution_ms=args.time_to_resolution_ms,
            manual_override_task=args.manual_override_task,
            error_kind=args.error_kind,
            extra=_json_arg("--extra-json", args.extra_json),
            session_id=args.session_id,
            source=args.source,
            ts_ms=args.ts_ms,
            where=where,
        )
    else:
        emission = contract.build_override(
            decision_id=args.decision_id,
            original_task=args.original_task,
            override_task=args.override_task,
            reason=args.reason,
            session_id=args.session_id,
            source=args.source,
            ts_ms=args.ts_ms,
            where=where,
        )
    # The reference's default: $SEQ_CH_MEM_PATH (its fallback, a path under ~/repos, is not
    # guessed here).
    seq_mem = args.seq_mem if args.seq_mem is not None else os.environ.get(SEQ_MEM_ENV) or None
    if args.no_log and not seq_mem:
        raise ValidationError(
            "--no-log", f"needs --seq-mem PATH (or ${SEQ_MEM_ENV}), or nothing would be recorded"
        )

    from plaudit.signals.emit import record, record_via_server

    if args.no_log:
        result = record(None, emission, seq_mem=seq_mem)
    elif traced:  # the server's handoff socket carries no trace context: append here
        result = None
    else:
        from plaudit.config import resolve_db

        # A `plaudit serve` on this store takes the event over a local socket, so this
        # process never imports or opens the store; without one, the store is opened here.
        result = record_via_server(resolve_db(args.db), emission, seq_mem=seq_mem)
    if result is None:
        Plaudit = _import_plaudit()

        with Plaudit.open(args.db) as p:
            if p.created:  # the first event of a new store: say where it went
                from plaudit.config import describe_store

                sys.stderr.write(f"created a new plaudit store at {describe_store(p.backend)}\n")
            result = record(p, emission, seq_mem=seq_mem)
    line = f"emitted {emission.type} decision_id={emission.decision_id}"
    if args.cmd == "outcome":
        line += f" outcome={args.outcome}"
    if result["status"] == "present":
        line += " (already recorded)"
    print(line)
    return 0


def import_without(module: str, blocked: str) -> Any:
    """Import `module` while `blocked` cannot be imported, unless something needs it.

    msgspec imports typing_extensions when it can (and with it `inspect`): about 8 ms of a
    shell hook's ~60 ms, for typing features the hook never uses. Without it, msgspec falls
    back to the standard `typing`. Should anything on the way really need the blocked module,
    the import is simply repeated normally; and it is importable again afterwards either way.
    """
    import importlib

    if blocked in sys.modules:
        return importlib.import_module(module)
    sys.modules[blocked] = None  # type: ignore[assignment]  # makes `import blocked` fail
    try:
        return importlib.import_module(module)
    except ImportError:
        del sys.modules[blocked]
        return importlib.import_module(module)
    finally:
        if sys.modules.get(blocked, 0) is None:
            del sys.modules[blocked]


def _import_plaudit() -> Any:
    return import_without("plaudit.core", "typing_extensions").Plaudit


def main(args: Sequence[str]) -> int:
    """Entry point; `args` is the whole argv after the program name. Never raises."""
    try:
        return run(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except PlauditError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("PLAUDIT_DEBUG"):
            raise
        sys.stderr.write(
            f"internal error: {type(exc).__name__}: {exc} (set PLAUDIT_DEBUG=1 for a traceback)\n"
        )
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))

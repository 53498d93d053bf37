"""Long-option abbreviations, as the reference router scripts' argparse parsers took them.

click wants options spelled out; argparse accepts any unambiguous prefix (`--min-dec` for
`--min-decisions`). Commands that stand in for those scripts accept the same prefixes, so
existing command lines keep working. Where a prefix fits one of the reference's options and
also one plaudit added (`--max` could be `--max-age-hours` here), the reference's wins, as it
was the only one there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click


class AbbreviatingCommand(click.Command):
    def __init__(self, *args: Any, reference_options: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reference_options = frozenset(reference_options)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.expand(ctx, args))

    def expand(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                for opt in (*param.opts, *param.secondary_opts):
                    if opt.startswith("--"):
                        takes_value[opt] = not (param.is_flag or param.count)
        out: list[str] = []
        value_next = False  # the previous word was an option waiting for its value
        for i, arg in enumerate(args):
            if arg == "--":
                out.extend(args[i:])
                break
            if not value_next and arg.startswith("--") and len(arg) > 2:
                name, eq, value = arg.partition("=")
                full = self._resolve(ctx, name, takes_value)
                arg = full + eq + value
                value_next = takes_value.get(full, False) and not eq
            else:
                value_next = False
            out.append(arg)
        return out

    def _resolve(self, ctx: click.Context, name: str, known: dict[str, bool]) -> str:
        if name in known:
            return name
        matches = sorted(opt for opt in known if opt.startswith(name))
        if len(matches) > 1:
            theirs = [opt for opt in matches if opt in self.reference_options]
            if len(theirs) != 1:
                raise click.UsageError(
                    f"ambiguous option {name}: could be {', '.join(matches)}", ctx
                )
            matches = theirs
        return matches[0] if matches else name  # an unknown one: click reports it

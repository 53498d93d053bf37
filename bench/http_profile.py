"""Summarise the py-spy profiles `http_load.py --single --profile DIR` wrote, one per endpoint.

    python bench/http_profile.py DIR                 # every profile in DIR
    python bench/http_profile.py DIR --match record  # the files whose name contains 'record'
    python bench/http_profile.py DIR --under Ledger.score --top 25

A profile is py-spy's raw (collapsed) stacks of the server while one endpoint was measured.
Samples of threads that were only waiting (a leaf in a lock, sleep, selector or accept) are
left out, so the shares are of the time the server was running Python or C code called from
it. Reported per file: the frames of plaudit (`--package`) by inclusive share (a frame counts
once per sample, wherever it sits in the stack), and the leaf frames by self share. Frames are
`function (file)`, line numbers folded.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

#: Leaf frames of a thread that waits rather than runs.
IDLE = (
    "Condition.wait ",
    "Event.wait ",
    "_PollLikeSelector.select ",
    "EpollSelector.select ",
    "select (selectors",
    "Runner.run (asyncio",
    "sleep ",
    "socket.accept ",
    "Thread._wait_for_tstate_lock",
    "Queue.get (queue",
    "SimpleQueue.get",
)
_LINE = re.compile(r":\d+\)$")


def load(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            frames = [_LINE.sub(")", f) for f in stack.split(";")]
            if not frames[-1].startswith(IDLE):
                stacks.append((frames, int(count)))
    return stacks


def summarise(path: Path, package: str, under: str | None, top: int) -> str:
    stacks = load(path)
    if under:
        stacks = [(f, n) for f, n in stacks if any(x.startswith(under) for x in f)]
    total = sum(n for _, n in stacks) or 1
    inclusive: collections.Counter[str] = collections.Counter()
    leaf: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        for f in set(frames):
            inclusive[f] += n
        leaf[frames[-1]] += n
    scope = f" under {under}" if under else ""
    out = [f"## {path.name}: {total} running samples{scope}", "inclusive:"]
    mine = [(f, n) for f, n in inclusive.most_common() if f"{package}/" in f]
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in mine[:top]]
    out.append("self:")
    out += [f"  {100 * n / total:5.1f}%  {f}" for f, n in leaf.most_common(top // 2)]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--match", default="", help="only files whose name contains this")
    ap.add_argument("--under", help="only samples with a frame starting with this")
    ap.add_argument("--package", default="plaudit")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    files = sorted(p for p in Path(args.directory).glob("*.txt") if args.match in p.name)
    if not files:
        raise SystemExit(f"no profile matching {args.match!r} in {args.directory}")
    for path in files:
        print(summarise(path, args.package, args.under, args.top), end="\n\n")


if __name__ == "__main__":
    main()

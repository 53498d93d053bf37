"""The code blocks docs mark for their tests: the fenced block after `<!-- NAME -->`."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def snippet(page: str, name: str) -> str:
    """The first fenced block after the marker `<!-- name -->` in docs/`page`, as written."""
    text = (DOCS / page).read_text(encoding="utf-8")
    _, marker, rest = text.partition(f"<!-- {name} -->")
    found = re.search(r"```[a-z]*\n(.*?)```", rest, re.S) if marker else None
    assert found, f"docs/{page} has no code block after <!-- {name} -->"
    return found.group(1)

"""Reference detection: did the model use an included arm? One rule per arm type."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

#: A memory is referenced when any run of this many characters of it appears in the output.
MEMORY_MIN_MATCH = 20
_ANCHOR = MEMORY_MIN_MATCH // 2  # k-gram length and output stride: k + stride - 1 < 20


class MemoryIndex:
    """Finds which memories have a 20-character substring in a text, in one pass over it.

    Every 10-character window of every memory is indexed. A common substring of 20 characters
    contains an output window starting at a multiple of 10, so the output is probed only every
    10 characters and each hit is extended both ways to confirm 20 characters. Hits are kept as
    distinct 30-character neighbourhoods, which bounds the work on repetitive memories. One
    index serves all of a run's memories, so a long output is scanned once, not once each.
    """

    def __init__(self, contents: str | Mapping[str, str]) -> None:
        if isinstance(contents, str):
            contents = {"": contents}
        self.short: dict[str, str] = {}
        self.keys = set(contents)
        self._grams: dict[str, set[tuple[str, str, str]]] = {}
        k = _ANCHOR
        for key, content in contents.items():
            if len(content) < MEMORY_MIN_MATCH:
                self.short[key] = content
                continue
            for p in range(len(content) - k + 1):
                left = content[max(0, p - k) : p]
                right = content[p + k : p + 2 * k]
                self._grams.setdefault(content[p : p + k], set()).add((key, left, right))

    def referenced(self, text: str) -> set[str]:
        """The keys of the memories found in `text`."""
        # nothing 20 long to find in a short memory: it must appear whole (and be non-empty)
        found = {key for key, content in self.short.items() if content and content in text}
        wanted = len(self.keys)
        k = _ANCHOR
        grams = self._grams
        for j in range(0, len(text) - k + 1, k):
            hoods = grams.get(text[j : j + k])
            if not hoods:
                continue
            out_left = text[max(0, j - k) : j]
            out_right = text[j + k : j + 2 * k]
            for key, left, right in hoods:
                if key in found:
                    continue
                if _common_suffix(out_left, left) + k + _common_prefix(out_right, right) >= (
                    MEMORY_MIN_MATCH
                ):
                    found.add(key)
                    if len(found) == wanted:
                        return found
        return found

    def found_in(self, text: str) -> bool:
        return bool(self.referenced(text))


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


@lru_cache(maxsize=256)
def memory_index(memories: tuple[tuple[str, str], ...]) -> MemoryIndex:
    """A cached index for one set of (arm id, content) pairs: agents repeat their inventory."""
    return MemoryIndex(dict(memories))


@lru_cache(maxsize=4096)
def _word_re(word: str) -> re.Pattern[str]:
    # Word boundaries that also treat '_' and digits as word characters: "go" is not in "good".
    return re.compile(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _path_re(path: str) -> re.Pattern[str]:
    # A whole path component, in any case: "a.py" is not in "data.py", "README.md" is not in
    # "README.md.bak", "README.mdx" or "notREADME.md", and "readme.md" is "README.md". A
    # sentence's full stop after the name still counts ("see README.md.").
    return re.compile(
        r"(?<![A-Za-z0-9_.\-])" + re.escape(path) + r"(?![A-Za-z0-9_\-]|\.[A-Za-z0-9_])",
        re.IGNORECASE,
    )


def tool_call_names(tool_calls: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(c["name"]) for c in tool_calls}


def tool_call_text(tool_calls: Sequence[Mapping[str, Any]]) -> str:
    """Tool-call metadata as one searchable string (arguments included)."""
    if not tool_calls:
        return ""
    return "\n".join(msgspec.json.encode(dict(c)).decode() for c in tool_calls)


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_PATH_CHARS = _WORD_CHARS | {".", "-"}
_WORD_RUN = re.compile(r"[a-z0-9_]+")
_PATH_RUN = re.compile(r"[a-z0-9_.\-]+")


class _Text:
    """One text searched for many arms. Most included arms are not referenced, and a regex
    search per arm was most of an observe at 1,000 arms; for ASCII text the rules reduce to set
    lookups, exactly (IGNORECASE matches across scripts, e.g. "s" to the long s, so non-ASCII
    text always gets the regex):

    - a word rule (`_word_re`) on a key of word characters matches iff the key, lower-cased, is
      a maximal run of word characters;
    - a path rule (`_path_re`) on a key of word characters, "." and "-" matches iff the key is a
      maximal run of those characters, or a prefix of one followed by a "." that is not followed
      by a word character (a sentence's full stop)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.low = text.lower() if text.isascii() else None
        self._words: set[str] | None = None
        self._paths: set[str] | None = None

    def words(self) -> set[str]:
        if self._words is None:
            self._words = set(_WORD_RUN.findall(self.low or ""))
        return self._words

    def paths(self) -> set[str]:
        if self._paths is None:
            out: set[str] = set()
            for run in set(_PATH_RUN.findall(self.low or "")):
                out.add(run)
                at = run.find(".")
                while at >= 0:
                    if at + 1 == len(run) or run[at + 1] not in _WORD_CHARS:
                        out.add(run[:at])
                    at = run.find(".", at + 1)
            self._paths = out
        return self._paths

    def word(self, key: str) -> bool:
        return self.has(_key(key), word=True)

    def path(self, key: str) -> bool:
        return self.has(_key(key), word=False)

    def has(self, k: _Key, *, word: bool) -> bool:
        """Whether the word rule (`word`) or the path rule matches key `k` in the text."""
        key, low, plain_word, plain_path = k
        if self.low is not None and low is not None:
            if plain_word if word else plain_path:
                return low in (self.words() if word else self.paths())
            if low not in self.low:
                return False
        rx = _word_re(key) if word else _path_re(key)
        return rx.search(self.text) is not None


#: A key prepared for `_Text.has`: the key, its lower case if ASCII (else None), and whether
#: it is made only of word characters, or only of path-component characters.
_Key = tuple[str, "str | None", bool, bool]


@lru_cache(maxsize=65536)
def _key(key: str) -> _Key:
    if not key.isascii():
        return (key, None, False, False)
    low = key.lower()
    return (key, low, _WORD_CHARS.issuperset(low), _PATH_CHARS.issuperset(low))


@lru_cache(maxsize=65536)
def _rule(arm_id: str, content: str | None) -> tuple[str, tuple[_Key, ...]]:
    """An arm's type and the keys its rule looks for (parsed once per arm, not per run)."""
    type_, category, name = arm_id.split(":", 2)
    if type_ == "tool":
        return type_, ((name, None, False, False),)
    if type_ == "skill":
        return type_, (_key(category),)
    if type_ == "file":
        path = content or name
        candidates = dict.fromkeys((path, path.replace("\\", "/").rsplit("/", 1)[-1]))
        return type_, tuple(_key(c) for c in candidates if c)
    return type_, ()


def is_referenced(
    arm_id: str,
    content: str | None,
    text: str,
    calls_text: str,
    call_names: set[str],
    *,
    texts: tuple[_Text, _Text] | None = None,
) -> bool:
    """The per-type rule: tool by call name, skill by word, file by name or path, memory by
    any 20-character substring, section always. `texts`: `text` and `calls_text` prepared
    once for many arms."""
    if arm_id.startswith("memory:"):
        return bool(content) and MemoryIndex(content).found_in(text)
    type_, keys = _rule(arm_id, content)
    if type_ == "section":
        return True
    if type_ == "tool":
        return keys[0][0] in call_names
    out, calls = texts or (_Text(text), _Text(calls_text))
    word = type_ == "skill"
    return any(out.has(k, word=word) or calls.has(k, word=word) for k in keys)


def referenced_arms(
    arms: Mapping[str, str | None], text: str, tool_calls: Sequence[Mapping[str, Any]]
) -> dict[str, bool]:
    """Apply the rules to a run's included arms ({id: content}); memories share one scan."""
    names = tool_call_names(tool_calls)
    calls_text = tool_call_text(tool_calls)
    memories = tuple(sorted((a, c) for a, c in arms.items() if a.startswith("memory:") and c))
    found = memory_index(memories).referenced(text) if memories else set()
    out, calls = _Text(text), _Text(calls_text)
    result = {}
    for arm_id, content in arms.items():  # `is_referenced`, inlined: it runs once per arm
        if arm_id.startswith("memory:"):
            result[arm_id] = arm_id in found
            continue
        type_, keys = _rule(arm_id, content)
        if type_ == "tool":
            result[arm_id] = keys[0][0] in names
        elif type_ == "section":
            result[arm_id] = True
        else:
            word = type_ == "skill"
            result[arm_id] = any(out.has(k, word=word) or calls.has(k, word=word) for k in keys)
    return result


_WORD = re.compile(r"[A-Za-z0-9_]+")
_NOT_HELD = object()
_PATHISH = re.compile(r"[A-Za-z0-9_.\-/\\]+")


class _Output:
    """A run's output and tool calls, split once for every question asked of them (which
    arms it references anywhere, and which included ones)."""

    def __init__(self, text: str, tool_calls: Sequence[Mapping[str, Any]]) -> None:
        self.text = text
        self.tool_calls = tool_calls
        self.names = tool_call_names(tool_calls)
        self.calls_text = tool_call_text(tool_calls)
        self.texts = (_Text(text), _Text(self.calls_text))
        self.ascii = self.texts[0].low is not None and self.texts[1].low is not None

    def words(self) -> set[str] | None:
        """The lower-case words of the output and the calls if both are ASCII, else None
        (then only the regex rules are exact, see `_Text`)."""
        if not self.ascii:
            return None
        return self.texts[0].words() | self.texts[1].words()


class InventoryIndex:
    """Which arms of a whole inventory an output references, without a regex per arm.

    `observe` uses it to find *misses*: needed arms that the run left out and the agent
    fetched anyway (read the file, found the tool or the memory), which its output then
    references. At 10,000 arms one regex per arm would cost tens of milliseconds per run;
    here each rule is a lookup from what the output contains to the arms it could name,
    confirmed by the arm's own rule (`is_referenced`), so the answer is the same.

    Sections are left out: "always referenced when included" says nothing about a run that
    did not include them. So is a skill whose category word names other registered skills
    too: the word cannot say which of them the agent fetched (an output that says "dev" would
    otherwise count as fetching every `skill:dev:*`)."""

    def __init__(self, arms: Mapping[str, str | None]) -> None:
        self.tools: dict[str, list[str]] = {}
        self.skills: dict[str, list[str]] = {}
        #: categories with '.' or '-', file names with other characters: matched by their regex
        self.odd: list[tuple[str, str | None]] = []
        #: file arms by lower-case base name: (arm id, content, the lower-case keys of its
        #: rule when every key is a plain ASCII path, else None: matched by the regex rule)
        self.files: dict[str, list[tuple[str, str | None, tuple[str, ...] | None]]] = {}
        #: of those, by each lower-case key, the arms whose keys are all plain ASCII paths
        #: (the rule is then a lookup), and by base name the others (confirmed by the rule)
        self.plain_files: dict[str, list[str]] = {}
        self.other_files: dict[str, list[tuple[str, str | None]]] = {}
        memories: list[tuple[str, str]] = []
        #: every arm the index was built from, with its content: `included` trusts the index
        #: only for these
        self.held: dict[str, str | None] = dict(arms)
        plain_skills: set[str] = set()
        for arm_id, content in arms.items():
            type_, category, name = arm_id.split(":", 2)
            if type_ == "tool":
                self.tools.setdefault(name, []).append(arm_id)
            elif type_ == "skill":
                if _WORD.fullmatch(category):
                    self.skills.setdefault(category.lower(), []).append(arm_id)
                    plain_skills.add(arm_id)
                else:
                    self.odd.append((arm_id, None))
            elif type_ == "file":
                path = (content or name).replace("\\", "/")
                base = path.rsplit("/", 1)[-1].lower()
                if _PATHISH.fullmatch(base):
                    keys = _rule(arm_id, content)[1]
                    plain = tuple(k[1] for k in keys if k[1] is not None and k[3])
                    entry = (arm_id, content, plain if len(plain) == len(keys) else None)
                    self.files.setdefault(base, []).append(entry)
                    if entry[2] is not None:
                        for k in set(plain):
                            self.plain_files.setdefault(k, []).append(arm_id)
                    else:
                        self.other_files.setdefault(base, []).append((arm_id, content))
                else:
                    self.odd.append((arm_id, content))
            elif type_ == "memory" and content:
                memories.append((arm_id, content))
        self.memories = MemoryIndex(dict(memories)) if memories else None
        per_category: dict[str, int] = {}
        for arm_id in arms:
            if arm_id.startswith("skill:"):
                cat = arm_id.split(":", 2)[1].lower()
                per_category[cat] = per_category.get(cat, 0) + 1
        #: skills whose category word other registered skills share: never a miss
        self.shared = {
            a
            for a in arms
            if a.startswith("skill:") and per_category[a.split(":", 2)[1].lower()] > 1
        }
        #: of those, the ones whose category is a plain word: its lower case
        self.shared_words = {
            a: a.split(":", 2)[1].lower() for a in self.shared if a in plain_skills
        }
        #: the held arms in order, and each one's position: `hits` answers for a run's
        #: included arms as one boolean array over these, not one dictionary entry per arm
        self.order: list[str] = list(arms)
        self.pos: dict[str, int] = {a: i for i, a in enumerate(self.order)}
        #: sections: referenced whenever included
        self.always = np.zeros(len(self.order), dtype=bool)
        self.always[[self.pos[a] for a in arms if a.startswith("section:")]] = True
        self.shared_at = np.fromiter(
            (self.pos[a] for a in self.shared), dtype=np.int64, count=len(self.shared)
        )
        #: shared skills with a plain category word, by that word: the word rule decides them
        by_word: dict[str, list[int]] = {}
        for a, w in self.shared_words.items():
            by_word.setdefault(w, []).append(self.pos[a])
        self.by_word = {w: np.array(at, dtype=np.int64) for w, at in by_word.items()}
        #: shared skills that only their own rule can decide (a category with '.' or '-')
        self.by_rule = np.zeros(len(self.order), dtype=bool)
        self.by_rule[[self.pos[a] for a in self.shared if a not in self.shared_words]] = True

    def referenced(
        self, text: str, tool_calls: Sequence[Mapping[str, Any]], among: set[str] | None = None
    ) -> set[str]:
        """The arms (of `among`, default all) that the output references, sections aside."""
        found = self._referenced(_Output(text, tool_calls))
        return found if among is None else found & among

    def _referenced(self, out: _Output) -> set[str]:
        text, calls_text, names, texts = out.text, out.calls_text, out.names, out.texts
        found: set[str] = set()
        for n in names:
            found.update(self.tools.get(n, ()))
        both = text + "\n" + calls_text
        if self.skills:
            words = out.words()
            if words is None:
                words = {w.lower() for w in _WORD.findall(both)}
            for w in words & self.skills.keys():
                if len(self.skills[w]) == 1:
                    found.update(self.skills[w])
        found.update(
            a
            for a, c in self.odd
            if (a not in self.shared) and is_referenced(a, c, text, calls_text, names, texts=texts)
        )
        if self.files:
            if out.ascii:
                # ASCII: a file's rule matches only where its base name is one of the text's
                # path components (`_Text.paths`, which a key of plain characters must be, as
                # `_Text.has` says; a longer path key's match ends in its base name), so those
                # are the candidates, and for plain keys the lookup is the rule itself. This
                # also finds a name used as a directory ("docs" in "docs/guide.md"), which
                # candidates taken from each token's last component missed.
                paths = texts[0].paths() | texts[1].paths()
                for p in paths & self.plain_files.keys():
                    found.update(self.plain_files[p])
                for p in paths & self.other_files.keys():
                    for arm_id, content in self.other_files[p]:
                        if arm_id not in found and is_referenced(
                            arm_id, content, text, calls_text, names, texts=texts
                        ):
                            found.add(arm_id)
            else:
                # Candidates: every component of every path-like token, and each one's
                # prefixes before a "." (a name may end at a full stop: "guide.md..x").
                parts: set[str] = set()
                for t in _PATHISH.findall(both):
                    for c in t.replace("\\", "/").lower().split("/"):
                        parts.add(c)
                        parts.update(c[:i] for i, ch in enumerate(c) if ch == ".")
                for part in parts:
                    for arm_id, content, _ in self.files.get(part, ()):
                        if arm_id not in found and is_referenced(
                            arm_id, content, text, calls_text, names, texts=texts
                        ):
                            found.add(arm_id)
        if self.memories is not None:
            found |= self.memories.referenced(text)
        return found

    def included(
        self,
        arms: Mapping[str, str | None],
        text: str,
        tool_calls: Sequence[Mapping[str, Any]],
        found: set[str] | None = None,
    ) -> dict[str, bool]:
        """`referenced_arms` for a run's included arms, from one scan of the output.

        `found` is `referenced(text, tool_calls)` if already computed (the miss search needs
        it too). Per arm, the rules would cost a lookup or a regex for each of hundreds of
        included arms; the index costs one pass over the output. What the index leaves out
        is decided by the per-arm rules: sections (always referenced when included), skills
        whose category word other skills share, and arms this index does not hold."""
        if found is None:
            found = self.referenced(text, tool_calls)
        held, shared = self.held, self.shared
        out: dict[str, bool] = {}
        rest: dict[str, str | None] = {}
        words: set[str] | None = None  # the output's and the calls' words, if both are ASCII
        split = False
        for a, c in arms.items():
            if held.get(a, _NOT_HELD) != c or a.startswith("section:"):
                rest[a] = c
            elif a not in shared:
                out[a] = a in found
            else:
                # A skill sharing its category word: the word rule, answered for all of them
                # from one split of the output (plain ASCII words only, as `_Text.has`).
                if not split:
                    split = True
                    out_text, calls_text = _Text(text), _Text(tool_call_text(tool_calls))
                    if out_text.low is not None and calls_text.low is not None:
                        words = out_text.words() | calls_text.words()
                word = self.shared_words.get(a)
                if word is None or words is None:
                    rest[a] = c
                else:
                    out[a] = word in words
        if rest:
            out.update(referenced_arms(rest, text, tool_calls))
        return out

    def positions(self, ids: Sequence[str]) -> np.ndarray | None:
        """The positions of `ids` among the held arms, or None if the index does not hold
        one of them (then only the per-arm rules can answer for it)."""
        try:
            return np.fromiter(map(self.pos.__getitem__, ids), dtype=np.int64, count=len(ids))
        except KeyError:
            return None

    def hits(
        self,
        at: np.ndarray,
        text: str,
        tool_calls: Sequence[Mapping[str, Any]],
        found: set[str] | None = None,
    ) -> np.ndarray:
        """`included` for held arms with the index's own contents, at positions `at` (from
        `positions`), as booleans aligned with `at`. An observe at 1,000 arms spent more on
        `included`'s dictionary entry per arm than on reading the output; here the work
        grows with what the output references, plus one gather.

        The same rules decide as in `included`: an arm `referenced` finds; a section, always;
        a skill sharing its category word, by that word (plain ASCII words), else by its own
        rule."""
        out = _Output(text, tool_calls)
        return self._hits(out, at, self._referenced(out) if found is None else found)

    def scan(
        self, at: np.ndarray, text: str, tool_calls: Sequence[Mapping[str, Any]]
    ) -> tuple[set[str], np.ndarray]:
        """`referenced` and `hits` together, from one split of the output."""
        out = _Output(text, tool_calls)
        found = self._referenced(out)
        return found, self._hits(out, at, found)

    def _hits(self, out: _Output, at: np.ndarray, found: set[str]) -> np.ndarray:
        text, tool_calls = out.text, out.tool_calls
        hit = self.always.copy()
        if found:
            hit[np.fromiter(map(self.pos.__getitem__, found), np.int64, len(found))] = True
        by_rule = self.by_rule
        if len(self.shared_at):
            hit[self.shared_at] = False  # `referenced` leaves them out; set only below
            if self.by_word:
                words = out.words()
                if words is not None:
                    for w in words & self.by_word.keys():
                        hit[self.by_word[w]] = True
                else:  # non-ASCII text: the regex rule, as `_Text.has`
                    by_rule = by_rule.copy()
                    for where in self.by_word.values():
                        by_rule[where] = True
        got = hit[at]
        odd = np.flatnonzero(by_rule[at])
        if len(odd):
            ids = [self.order[i] for i in at[odd].tolist()]
            rule = referenced_arms({a: self.held[a] for a in ids}, text, tool_calls)
            got[odd] = [rule[a] for a in ids]
        return got


#: recent registries' indexes, newest last: (registry mapping, its index); a process may hold
#: several stores, and rebuilding on every switch cost 0.5 s at 10,000 arms
_INVENTORY: list[tuple[Mapping[str, Any], InventoryIndex]] = []
_INVENTORY_KEEP = 8


def inventory_index(arms: Mapping[str, Any]) -> InventoryIndex:
    """The index of a registry's arms ({id: Arm or content}), built once per registry object
    (the store replaces it whenever arms are registered)."""
    for held, index in _INVENTORY:
        if held is arms:
            return index
    index = InventoryIndex({a: getattr(v, "content", v) for a, v in arms.items()})
    _INVENTORY.append((arms, index))
    del _INVENTORY[:-_INVENTORY_KEEP]
    return index

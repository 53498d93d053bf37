"""Reference detection per arm type, and the memory rule against a brute-force oracle."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from plaudit.bandit.detect import (
    MemoryIndex,
    is_referenced,
    referenced_arms,
    tool_call_names,
    tool_call_text,
)


def ref(arm_id: str, text: str = "", calls: list[dict] | None = None, content: str | None = None):
    calls = calls or []
    return is_referenced(arm_id, content, text, tool_call_text(calls), tool_call_names(calls))


def test_tool_matches_the_call_name_exactly() -> None:
    assert ref("tool:exec:Bash", calls=[{"name": "Bash"}])
    assert not ref("tool:exec:Bash", "I would use Bash", calls=[{"name": "BashOutput"}])


def test_skill_matches_on_word_boundaries() -> None:
    assert ref("skill:go:main", "Written in Go, of course.")
    assert not ref("skill:go:main", "a good result")
    assert not ref("skill:go:main", "golang_style")
    assert ref("skill:coding:main", calls=[{"name": "Skill", "skill": "coding"}])


def test_file_matches_name_or_path_not_a_longer_name() -> None:
    assert ref("file:workspace:README.md", "see README.md.")
    assert ref("file:workspace:docs/guide.md", "open guide.md")
    assert ref(
        "file:workspace:guide",
        "x",
        content="docs/guide.md",
        calls=[{"name": "Read", "file_path": "/repo/docs/guide.md"}],
    )
    assert not ref("file:workspace:a.py", "edited data.py")
    assert not ref("file:workspace:a.py", "edited a.pyc")


def test_file_matches_a_whole_path_component_in_any_case() -> None:
    arm = "file:workspace:README.md"
    assert ref(arm, "check readme.md")  # the seed original's own test case
    assert ref(arm, "Updated /repo/README.md and docs.")
    assert ref(arm, 'edited "README.MD"')
    assert not ref(arm, "restored README.md.bak")
    assert not ref(arm, "see README.mdx")
    assert not ref(arm, "see notREADME.md")
    assert not ref(arm, "see README.md-old")
    assert not ref("file:workspace:docs/guide.md", "open guide.md.orig")


@settings(max_examples=200)
@given(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}\.[a-z]{1,4}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9_]{1,4}", fullmatch=True),
)
def test_a_longer_name_never_matches(name: str, extra: str) -> None:
    arm = f"file:workspace:{name}"
    assert ref(arm, f"see {name} now") and ref(arm, f"see {name.swapcase()} now")
    for longer in (name + extra, name + "." + extra, extra + name, name + "-" + extra):
        assert not ref(arm, f"see {longer} now"), longer


def test_the_seed_originals_examples() -> None:
    # seed table: tool by call metadata, skill by word in output or tool metadata, file by
    # name in the text, memory by a 20+ character substring, section always
    assert ref("tool:exec:Bash", calls=[{"name": "Bash", "command": "ls"}])
    assert not ref("tool:exec:Bash", "I ran Bash")  # text alone is not a call
    assert ref("skill:coding:main", "This is a coding task.")
    assert ref("skill:coding:main", calls=[{"name": "Task", "skill": "Coding"}])
    assert ref("file:workspace:README.md", "Output mentions README.md")
    memory = "Deploys go through the canary stage and need two approvals."
    assert ref("memory:project:deploys", f"Note: {memory[10:40]}", content=memory)
    assert ref("section:system:instructions", "")


def test_section_is_always_referenced_and_unknown_never() -> None:
    assert ref("section:system:instructions")


def test_memory_any_20_char_substring_not_just_a_prefix() -> None:
    memory = "The first sixty characters are boring filler text, nothing to see. " * 2 + (
        "Deploys need two approvals from the release captain."
    )
    assert ref(
        "memory:project:x", "as noted, two approvals from the release captain", content=memory
    )
    assert not ref("memory:project:x", "two approvals from", content=memory)  # 18 chars
    assert not ref("memory:project:x", "nothing here", content=memory)
    assert not ref("memory:project:x", "anything", content="")


def test_short_memory_falls_back_to_the_whole_text() -> None:
    assert ref("memory:project:x", "the key is ab12", content="ab12")
    assert not ref("memory:project:x", "the key is ab1", content="ab12")


def brute_force(memory: str, text: str, k: int = 20) -> bool:
    if len(memory) < k:
        return bool(memory) and memory in text
    return any(memory[i : i + k] in text for i in range(len(memory) - k + 1))


alphabet = st.sampled_from("ab c")


@settings(max_examples=400, deadline=None)
@given(
    memory=st.text(alphabet, max_size=80),
    text=st.text(alphabet, max_size=120),
)
def test_memory_index_matches_brute_force_on_repetitive_text(memory: str, text: str) -> None:
    assert MemoryIndex(memory).found_in(text) == brute_force(memory, text)


@settings(max_examples=300, deadline=None)
@given(
    memory=st.text(min_size=20, max_size=200),
    prefix=st.text(max_size=50),
    suffix=st.text(max_size=50),
    data=st.data(),
)
def test_memory_index_finds_any_planted_window(memory: str, prefix: str, suffix: str, data):
    start = data.draw(st.integers(0, len(memory) - 20))
    length = data.draw(st.integers(20, len(memory) - start))
    text = prefix + memory[start : start + length] + suffix
    assert MemoryIndex(memory).found_in(text)
    assert MemoryIndex(memory).found_in(text) == brute_force(memory, text)


@settings(max_examples=200, deadline=None)
@given(
    memories=st.dictionaries(
        st.text("xyz", min_size=1, max_size=3), st.text(alphabet, max_size=60), max_size=5
    ),
    text=st.text(alphabet, max_size=150),
)
def test_one_index_for_many_memories_matches_brute_force(memories, text) -> None:
    found = MemoryIndex(memories).referenced(text)
    assert found == {k for k, m in memories.items() if brute_force(m, text)}


def test_referenced_arms_applies_every_rule_in_one_call() -> None:
    arms = {
        "tool:exec:Bash": None,
        "skill:coding:main": None,
        "file:workspace:README.md": None,
        "memory:project:a": "alpha beta gamma delta epsilon zeta",
        "memory:project:b": "one two three four five six seven",
        "section:system:x": None,
    }
    got = referenced_arms(arms, "notes: gamma delta epsilon zeta. README.md", [{"name": "Bash"}])
    assert got == {
        "tool:exec:Bash": True,
        "skill:coding:main": False,
        "file:workspace:README.md": True,
        "memory:project:a": True,
        "memory:project:b": False,
        "section:system:x": True,
    }


@given(
    key=st.text(alphabet="aAsSkK._-/1ſKİı", min_size=1, max_size=6),
    text=st.text(alphabet="aAsSkK._-/1 \n,", max_size=40)
    | st.text(alphabet="aAsSkK._-/1ſKİı \n,", max_size=40),
)
@settings(max_examples=1000, deadline=None)
def test_set_lookups_match_the_regex_rules(key: str, text: str) -> None:
    """For ASCII text the word and path rules become set lookups; they must agree with the
    regex search for every key and text, including characters IGNORECASE matches across
    scripts (the long s, the Kelvin sign) and full stops after a name."""
    from plaudit.bandit.detect import _path_re, _Text, _word_re

    t = _Text(text)
    assert t.word(key) == (_word_re(key).search(text) is not None)
    assert t.path(key) == (_path_re(key).search(text) is not None)


@given(
    names=st.lists(st.text(alphabet="abK._-/ſ1", min_size=1, max_size=5), min_size=1, max_size=6),
    text=st.text(alphabet="abK._-/ſ1 ", max_size=30),
    called=st.lists(st.text(alphabet="abK1", min_size=1, max_size=3), max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_referenced_arms_applies_each_arms_rule(names, text, called) -> None:
    """The batch over a run's arms (inlined for speed) answers as the per-arm rule does."""
    arms: dict[str, str | None] = {}
    for i, n in enumerate(names):
        arms[f"tool:t:{n}"] = None
        arms[f"skill:{n.replace(':', '')}:s{i}"] = None
        arms[f"file:ws:x{i}"] = n
        arms[f"section:s:{i}"] = None
    calls = [{"name": c, "arg": text[:5]} for c in called]
    got = referenced_arms(arms, text, calls)
    names_set, calls_text = tool_call_names(calls), tool_call_text(calls)
    for arm_id, content in arms.items():
        assert got[arm_id] == is_referenced(arm_id, content, text, calls_text, names_set)


_NAMES = st.sampled_from(["Bash", "Read", "guide.md", "README.md", "app.py", "legal", "go", "x-y"])
_PIECES = st.sampled_from(
    [
        "see README.md.",
        "README.md.bak",
        "notREADME.md",
        "docs/guide.md",
        "path=src/app.py",
        "data.py",
        "a good legal read",
        "golang",
        "x-y here",
        "docs/",
        "guide.md..x",
        "deploys go through the canary stage",
        "Go",
        " ",
        "\n",
    ]
)


_INVENTORY: dict[str, str | None] = {
    "tool:exec:Bash": None,
    "tool:fs:Read": None,
    "skill:legal:main": None,
    "skill:go:main": None,
    "skill:x-y:main": None,
    "file:workspace:README.md": None,
    "file:workspace:docs/guide.md": None,
    "file:notes:docs": None,  # "docs/guide.md" names it as a directory
    "file:src:app": "src/app.py",
    "file:odd:my notes.txt": None,
    "memory:project:deploys": "Deploys go through the canary stage and need two approvals.",
    "section:system:instructions": None,
}


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=8), calls=st.lists(_NAMES, max_size=3))
def test_inventory_index_agrees_with_the_per_arm_rules(pieces, calls) -> None:
    """The indexed detector that finds misses over a whole inventory gives exactly the arms
    the per-arm rules give (sections aside: they are referenced only when included)."""
    from plaudit.bandit.detect import InventoryIndex

    arms = dict(_INVENTORY)
    text = "".join(pieces) + (" my notes.txt" if len(pieces) % 3 == 0 else "")
    tool_calls = [{"name": n, "file_path": n} for n in calls]
    expected = {
        a
        for a, hit in referenced_arms(arms, text, tool_calls).items()
        if hit and not a.startswith("section:")
    }
    assert InventoryIndex(arms).referenced(text, tool_calls) == expected


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES | st.sampled_from(["café go ", "docs/guide.md ü", "GO\n"]), max_size=8),
    calls=st.lists(_NAMES, max_size=3),
    chosen=st.lists(st.integers(0, 14), max_size=15, unique=True),
    other_content=st.booleans(),
)
def test_the_index_answers_for_included_arms_as_the_per_arm_rules(
    pieces, calls, chosen, other_content
) -> None:
    """`InventoryIndex.included` (one scan of the output, used by observe for large runs)
    gives each included arm exactly what `referenced_arms` gives: sections, skills sharing a
    category word, arms the index does not hold and arms whose content differs from the
    index's are left to the per-arm rules."""
    from plaudit.bandit.detect import InventoryIndex

    inventory = {**_INVENTORY, "skill:go:other": None}  # "go" now names two skills
    unheld = {"tool:exec:Read": None, "file:ws:data.py": None}
    every = list(inventory) + list(unheld)
    included = {every[i]: {**inventory, **unheld}[every[i]] for i in chosen}
    if other_content and "file:src:app" in included:
        included["file:src:app"] = "README.md"  # not what the index was built with
    text = "".join(pieces)
    tool_calls = [{"name": n, "file_path": n} for n in calls]
    index = InventoryIndex(inventory)
    assert index.included(included, text, tool_calls) == referenced_arms(included, text, tool_calls)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        _PIECES | st.sampled_from(["café go ", "docs/guide.md ü", "GO\n", "x-y"]), max_size=8
    ),
    calls=st.lists(_NAMES, max_size=3),
    chosen=st.lists(st.integers(0, 13), max_size=14, unique=True),
)
def test_hits_answer_for_held_arms_as_the_per_arm_rules(pieces, calls, chosen) -> None:
    """`InventoryIndex.hits` (observe's path for a run whose arms are all registered) gives
    each arm what `referenced_arms` gives, in the order asked: sections, skills sharing a
    plain category word, and skills sharing an odd one (decided by their own rule) too."""
    from plaudit.bandit.detect import InventoryIndex

    inventory = {**_INVENTORY, "skill:go:other": None, "skill:x-y:other": None}
    ids = [list(inventory)[i] for i in chosen]
    text = "".join(pieces)
    tool_calls = [{"name": n, "file_path": n} for n in calls]
    index = InventoryIndex(inventory)
    at = index.positions(ids)
    assert at is not None
    expected = referenced_arms({a: inventory[a] for a in ids}, text, tool_calls)
    assert index.hits(at, text, tool_calls).tolist() == [expected[a] for a in ids]
    found = index.referenced(text, tool_calls)
    assert index.hits(at, text, tool_calls, found).tolist() == [expected[a] for a in ids]
    assert index.positions([*ids, "tool:exec:Unheld"]) is None


def test_a_category_word_shared_by_several_skills_is_no_miss() -> None:
    """A skill is referenced by its category word; when other registered skills share that
    word, the output cannot say which one the agent fetched, so none is a miss."""
    from plaudit.bandit.detect import InventoryIndex, inventory_index

    arms = {"skill:dev:one": None, "skill:dev:two": None, "skill:legal:main": None}
    idx = InventoryIndex(arms)
    assert idx.referenced("some dev work under legal review", []) == {"skill:legal:main"}
    # the index is kept per registry object
    assert inventory_index(arms) is inventory_index(arms)
    assert inventory_index(dict(arms)) is not inventory_index(arms)

"""Keys, checkpoints and proof bundles: built from a real log, checked with no store."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plaudit.errors import ConfigError, IntegrityError, ValidationError
from plaudit.events import make_event, prepare
from plaudit.store.chain import GENESIS
from plaudit.store.checkpoints import parse_checkpoint, sign_checkpoint
from plaudit.store.keys import ENV_SIGNING_KEY, create_key_file, load_public_key
from plaudit.store.merkle import CompactRange, leaf_hashes
from plaudit.store.proofs import (
    BundleEvent,
    build_consistency,
    build_proof,
    check_consistency,
    check_proof,
)
from plaudit.store.tree import (
    TREE_NODES_DDL,
    MemorySource,
    TxSource,
    consistency_proof,
    inclusion_proof,
    store_nodes,
)

PLAUDIT = str(Path(sys.executable).with_name("plaudit"))


@pytest.fixture
def key(tmp_path):
    return create_key_file(tmp_path / "log.key")


def chained(n: int):
    """n prepared events and their chain hashes, as the log computes them."""
    events = [
        prepare(make_event("test.proof.v1", {"i": i, "note": 'héllo "q"'}, ts_ms=1000 + i))
        for i in range(n)
    ]
    prev, chains = GENESIS, []
    for p in events:
        prev = hashlib.sha256(prev + p.body()).digest()
        chains.append(prev)
    return events, chains


def as_bundle_event(i: int, p) -> BundleEvent:
    """Prepared event i (0-based) as a bundle carries it."""
    e = p.event
    return BundleEvent(
        seq=i + 1,
        id=e.id,
        type=e.type,
        ts_ms=e.ts_ms,
        session_id=e.session_id,
        source=e.source,
        payload_json=p.payload_text,
        meta_json=p.meta_text,
    )


def bundle_for(i: int, events, chains, key, size: int | None = None) -> bytes:
    size = len(chains) if size is None else size
    src = MemorySource(chains[:size], store_level=2)
    ck = sign_checkpoint(key, size, src.range.root, 5000)
    return build_proof(
        as_bundle_event(i, events[i]),
        prev_hash=GENESIS if i == 0 else chains[i - 1],
        audit_path=inclusion_proof(i, size, src, store_level=2),
        checkpoint=ck,
        public_key=key.public_key,
    )


# ---- keys -------------------------------------------------------------------------------------


def _key_file(db: str) -> Path:
    from plaudit import Plaudit
    from plaudit.store.trust_paths import default_key_path

    with Plaudit.open(db) as p:
        return default_key_path(p.backend)


def test_key_is_made_once_private_outside_the_database_folder_and_reused(tmp_path):
    from plaudit import Plaudit

    db = str(tmp_path / "log.db")
    with Plaudit.open(db) as p:
        p.log.append(make_event("test.proof.v1", {}))
        k1 = p.log.checkpoint() and p.log.key_info()
    path = _key_file(db)
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert tmp_path not in path.parents  # not beside the database
    before = path.read_bytes()
    with Plaudit.open(db) as p:
        assert p.log.key_info().fingerprint == k1.fingerprint
    assert path.read_bytes() == before
    assert [x.name for x in path.parent.iterdir() if x.name.startswith(".")] == []  # no temp


def test_key_from_env_as_path_or_pem(tmp_path, key, monkeypatch):
    from plaudit import Plaudit

    pem = (tmp_path / "log.key").read_text()
    for spec in (pem, str(tmp_path / "log.key")):
        monkeypatch.setenv(ENV_SIGNING_KEY, spec)
        db = str(tmp_path / f"s{len(spec)}.db")
        with Plaudit.open(db) as p:
            p.log.append(make_event("test.proof.v1", {}))
            assert p.log.checkpoint().log == key.fingerprint
        monkeypatch.delenv(ENV_SIGNING_KEY)
        assert not _key_file(db).exists()  # the environment wins: no file of the store's own


def test_key_errors_name_the_path(tmp_path, monkeypatch):
    from plaudit import Plaudit

    missing = tmp_path / "nope.pem"
    monkeypatch.setenv(ENV_SIGNING_KEY, str(missing))
    with Plaudit.open(tmp_path / "a.db") as p, pytest.raises(ConfigError, match=str(missing)):
        p.log.key_info()
    monkeypatch.delenv(ENV_SIGNING_KEY)
    db = str(tmp_path / "log.db")
    bad = _key_file(db)
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("garbage")
    with Plaudit.open(db) as p, pytest.raises(ConfigError, match=re.escape(str(bad))):
        p.log.key_info()
    assert bad.read_text() == "garbage"  # never replaced


RACE = (
    "import sys; from plaudit import Plaudit\n"
    "with Plaudit.open(sys.argv[1]) as p: print(p.log.key_info().fingerprint)"
)


def test_racing_processes_make_one_key(tmp_path):
    db = str(tmp_path / "log.db")
    procs = [
        subprocess.Popen([sys.executable, "-c", RACE, db], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    prints = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(prints) == 1


def test_public_key_files(tmp_path, key):
    (tmp_path / "pub.pem").write_text(key.public_pem())
    (tmp_path / "pub.hex").write_text(key.public_key.hex() + "\n")
    assert load_public_key(tmp_path / "pub.pem") == key.public_key
    assert load_public_key(tmp_path / "pub.hex") == key.public_key
    assert load_public_key(tmp_path / "log.key") == key.public_key  # a private key file too
    (tmp_path / "bad").write_text("zz")
    with pytest.raises(ValidationError, match="bad"):
        load_public_key(tmp_path / "bad")
    with pytest.raises(ValidationError, match="missing"):
        load_public_key(tmp_path / "missing")


# ---- checkpoints ------------------------------------------------------------------------------


def test_checkpoint_round_trip_and_signature(key, tmp_path):
    ck = sign_checkpoint(key, 42, bytes(range(32)), 1_700_000_000_000)
    text = ck.to_text()
    origin = f"plaudit/{key.fingerprint}"
    assert text.splitlines()[:4] == [
        origin,
        "42",
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "plaudit-time-ms 1700000000000",
    ]
    assert text.splitlines()[5].startswith(f"\u2014 {origin} ")
    back = parse_checkpoint(text)
    assert back == ck
    back.verify(key.public_key)
    other = create_key_file(tmp_path / "other.key")
    with pytest.raises(IntegrityError, match="names log"):
        back.verify(other.public_key)
    forged = text.replace("\n42\n", "\n43\n")
    with pytest.raises(IntegrityError, match="signature"):
        parse_checkpoint(forged).verify(key.public_key)


def test_checkpoints_of_the_older_format_still_read_and_verify(key):
    """Stores and witnesses keep `plaudit-checkpoint v1` notes written before C2SP."""
    from plaudit.store.checkpoints import Checkpoint, _v1_message

    root = bytes(range(32))
    signature = key.sign(_v1_message(key.fingerprint, 42, root, 7))
    old = Checkpoint(key.fingerprint, 42, root, 7, signature)
    text = old.to_text()
    assert text.startswith("plaudit-checkpoint v1\nlog ")
    back = parse_checkpoint(text)
    assert back == old
    back.verify(key.public_key)
    with pytest.raises(IntegrityError, match="signature"):
        parse_checkpoint(text.replace("size 42", "size 43")).verify(key.public_key)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("\n42\n", "\n042\n"), "line 2"),
        (lambda t: t.replace("\nAAAA", "\n AAAA"), "line 3"),
        (lambda t: t[:-1], "newline"),
        (lambda t: t[:40], "blank line"),
        (lambda t: t.upper(), "line 1"),
        (lambda t: t + "extra\n", "signature line"),
        (lambda t: t.replace("plaudit-time-ms", "plaudit-time"), "line 4"),
        (lambda t: "", "blank line"),
    ],
)
def test_malformed_checkpoints_say_which_line(key, edit, message):
    text = sign_checkpoint(key, 42, bytes(32), 7).to_text()
    with pytest.raises(ValidationError, match=message):
        parse_checkpoint(edit(text), where="f.checkpoint")


# ---- bundles ----------------------------------------------------------------------------------


def test_bundle_checks_for_every_event(key):
    events, chains = chained(11)
    for size in (1, 6, 11):
        for i in range(size):
            report = check_proof(bundle_for(i, events, chains, key, size))
            assert report.ok, report.message
            assert (report.seq, report.tree_size) == (i + 1, size)


def _tamper(data: bytes, path: tuple, value) -> bytes:
    doc = json.loads(data)
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value(target[path[-1]]) if callable(value) else value
    return msgspec.json.encode(doc) + b"\n"


def test_tampered_bundles_say_what_failed(key, tmp_path):
    events, chains = chained(9)
    good = bundle_for(4, events, chains, key)
    other = create_key_file(tmp_path / "other.key")
    flip = lambda h: ("0" if h[0] != "0" else "1") + h[1:]  # noqa: E731
    cases = [
        (("event", "payload_json"), lambda s: s.replace("4", "5"), "leaf"),
        (("event", "ts_ms"), 1, "leaf"),
        (("prev_hash",), flip, "leaf"),
        (("leaf_hash",), flip, "leaf"),
        (("audit_path",), lambda p: [flip(p[0]), *p[1:]], "root"),
        (("audit_path",), lambda p: p[:-1], "path"),
        (("event", "seq"), 99, "path"),
        (("checkpoint",), lambda c: c.replace("\n9\n", "\n8\n"), "signature"),
        (("public_key",), other.public_key.hex(), "key"),
        (("format",), "plaudit-proof v9", "format"),
        (("audit_path",), lambda p: [p[0].upper(), *p[1:]], "path"),
    ]
    for path, value, failed in cases:
        report = check_proof(_tamper(good, path, value))
        assert not report.ok and report.failed == failed, (path, report)
    # a consistent forgery under another key passes only until the key is pinned
    assert check_proof(good, trusted_key=key.public_key).ok
    forged = bundle_for(4, events, chains, other)
    assert check_proof(forged).ok
    pinned = check_proof(forged, trusted_key=key.public_key)
    assert pinned.failed == "key" and key.fingerprint in pinned.message
    for junk in (b"", b"{", b"[]", b'{"format": 1}', b"\xff\xfe", good[:-40]):
        assert check_proof(junk).failed == "format"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_flipping_any_byte_of_a_bundle_fails(key, data):
    _, chains = _BUNDLE_LOG
    i = data.draw(st.integers(0, len(chains) - 1))
    good = _bundles(key)[i]
    at = data.draw(st.integers(0, len(good) - 1))
    x = data.draw(st.integers(1, 255))
    bad = good[:at] + bytes([good[at] ^ x]) + good[at + 1 :]
    report = check_proof(bad)
    if report.ok:  # only a change of insignificant white space may keep the meaning
        assert json.loads(bad) == json.loads(good)
        assert bad.strip() == good.strip()


_BUNDLE_LOG = chained(13)
_BUNDLE_CACHE: dict[str, list[bytes]] = {}


def _bundles(key) -> list[bytes]:
    if key.fingerprint not in _BUNDLE_CACHE:
        events, chains = _BUNDLE_LOG
        _BUNDLE_CACHE[key.fingerprint] = [
            bundle_for(i, events, chains, key) for i in range(len(chains))
        ]
    return _BUNDLE_CACHE[key.fingerprint]


def test_build_refuses_a_proof_that_does_not_hold(key):
    events, chains = chained(5)
    src = MemorySource(chains)
    ck = sign_checkpoint(key, 5, bytes(32), 1)  # a root that is not the tree's
    ev = as_bundle_event(2, events[2])
    with pytest.raises(IntegrityError, match="cannot build"):
        build_proof(
            ev,
            prev_hash=chains[1],
            audit_path=inclusion_proof(2, 5, src),
            checkpoint=ck,
            public_key=key.public_key,
        )


def test_consistency_bundle(key):
    _, chains = chained(40)
    src = MemorySource(chains, store_level=2)
    old = sign_checkpoint(key, 17, MemorySource(chains[:17]).range.root, 1)
    new = sign_checkpoint(key, 40, src.range.root, 2)
    data = build_consistency(
        17, old.root, consistency_proof(17, 40, src, store_level=2), new, key.public_key
    )
    assert check_consistency(data, trusted_key=key.public_key, old=old).ok
    rewritten = sign_checkpoint(key, 17, bytes(32), 1)
    assert check_consistency(data, old=rewritten).failed == "root"
    lie = _tamper(data, ("old_root",), bytes(32).hex())
    assert check_consistency(lie).failed == "root"


# ---- with a real store, on both backends ------------------------------------------------------


def test_proofs_from_a_real_log(pl, key):
    batch = [make_event("test.proof.v1", {"i": i, "f": i / 3}) for i in range(700)]
    pl.log.append_batch(batch)
    backend = pl.log.backend
    with backend.write() as tx:
        tx.execute(tx.ddl(TREE_NODES_DDL))
        hashes = TxSource(tx).leaves(0, 700)
        ext = CompactRange.empty().extend(leaf_hashes(hashes[:300]))
        store_nodes(tx, ext.nodes)
        ext = ext.range.extend(leaf_hashes(hashes[300:]))
        store_nodes(tx, ext.nodes)
        store_nodes(tx, ext.nodes)  # a retried batch is harmless
    assert ext.root == MemorySource(hashes).range.root
    ck = sign_checkpoint(key, 700, ext.root, 9)
    with backend.read() as tx:
        src = TxSource(tx)
        assert tx.scalar("SELECT count(*) FROM plaudit_tree_nodes") == 3  # 2 at level 8, 1 at 9
        for seq in (1, 256, 257, 500, 700):
            e = next(pl.log.replay(seq - 1, until_seq=seq))
            prev = GENESIS if seq == 1 else src.leaves(seq - 2, seq - 1)[0]
            data = build_proof(
                e,
                prev_hash=prev,
                audit_path=inclusion_proof(seq - 1, 700, src),
                checkpoint=ck,
                public_key=key.public_key,
            )
            assert check_proof(data, trusted_key=key.public_key).ok
            assert json.loads(data)["chain_hash"] == e.hash


# ---- the command ------------------------------------------------------------------------------


def _cli(args, cwd, env=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    full.update(env or {})
    return subprocess.run(
        [PLAUDIT, *args], capture_output=True, text=True, cwd=cwd, env=full, timeout=60
    )


def test_check_proof_command_needs_no_store(tmp_path, key):
    events, chains = chained(9)
    good = tmp_path / "good.json"
    good.write_bytes(bundle_for(3, events, chains, key))
    bad = tmp_path / "bad.json"
    bad.write_bytes(_tamper(good.read_bytes(), ("audit_path",), lambda p: [p[1], p[0], *p[2:]]))
    pub = tmp_path / "log.pub"
    pub.write_text(key.public_key.hex())
    work = tmp_path / "cwd"
    work.mkdir()
    db = tmp_path / "never.db"
    env = {"PLAUDIT_DB": str(db)}

    r = _cli(["log", "check-proof", str(good), "--key", str(pub)], work, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OK: event ")

    r = _cli(["log", "check-proof", str(good)], work, env)
    assert r.returncode == 0 and "--key" in r.stderr

    r = _cli(["log", "check-proof", str(bad)], work, env)
    assert r.returncode == 1 and "FAILED (root)" in r.stdout and "Traceback" not in r.stderr

    r = _cli(["log", "check-proof", str(good), "--key", str(tmp_path / "gone.pub")], work, env)
    assert r.returncode == 1 and "gone.pub" in r.stderr and "Traceback" not in r.stderr

    r = _cli(["log", "check-proof", str(tmp_path / "absent.json")], work, env)
    assert r.returncode == 1 and "absent.json" in r.stderr

    (tmp_path / "junk.json").write_text("{not json")
    r = _cli(["log", "check-proof", str(tmp_path / "junk.json"), "--json"], work, env)
    assert r.returncode == 1 and json.loads(r.stdout)["failed"] == "format"

    assert not db.exists() and list(work.iterdir()) == []  # no store opened or created

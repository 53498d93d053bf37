"""Trust that does not live in the database: every reproduction of issue 28, as a test.

The key lives outside the database's folder, the verifier's confirmed checkpoint in the
verifier's own state file, witnesses only ever receive checkpoints of a durable prefix,
ordinary mishaps (a missing witness, a new store without a key) never halt anything, and
verify checks every stored field. Tests edit the database directly, as an attacker with the
file would (`_logtools.attacker`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logtools import attacker, ev
from plaudit import Plaudit
from plaudit.cli import main
from plaudit.store.trust_paths import default_key_path, verifier_state_path

KEY_ENV = "PLAUDIT_SIGNING_KEY"


@pytest.fixture(autouse=True)
def _no_configured_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("PLAUDIT_WITNESS", raising=False)


def fill(p: Plaudit, n: int, start: int = 1) -> None:
    p.log.append_batch([ev(i) for i in range(start, start + n)])


def test_the_confirmed_mark_is_the_verifiers_not_the_databases(db_url: str) -> None:
    """Marking a checkpoint verified in the database changes nothing: the default verify
    starts from the verifier's own state, so an edit before a forged mark is still found."""
    with Plaudit.open(db_url, checkpoint_every=100, checkpoint_seconds=0) as p:
        fill(p, 400)
        assert p.log.verify().ok  # full, and recorded in the verifier's state (size 400)
        state = verifier_state_path(p.backend)
        assert state.exists() and (state.stat().st_mode & 0o077) == 0
        state.unlink()  # a verifier that never ran on this store
        with attacker(db_url) as raw:
            raw.execute("UPDATE plaudit_events SET payload = '{\"i\":0}' WHERE seq = 341")
            raw.execute("UPDATE plaudit_checkpoints SET verified_ms = 1")  # the old forged mark
        report = p.log.verify()
        assert not report.ok and report.first_bad == 341 and report.mode == "full"


def test_an_edit_after_the_confirmed_checkpoint_is_found_incrementally(db_url: str) -> None:
    with Plaudit.open(db_url, checkpoint_every=100, checkpoint_seconds=0) as p:
        fill(p, 300)
        assert p.log.verify().ok
        fill(p, 50, 301)
        with attacker(db_url) as raw:
            raw.execute("UPDATE plaudit_events SET payload = '{\"i\":0}' WHERE seq = 320")
        report = p.log.verify()
        assert report.mode == "incremental" and report.from_checkpoint == 300
        assert not report.ok and report.first_bad == 320


def test_the_key_is_not_beside_the_database(tmp_path: Path) -> None:
    """A rewrite re-signed with a key found beside the database would pass: the key lives in
    the user's config directory instead, private."""
    db = tmp_path / "store" / "log.db"
    with Plaudit.open(db, checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 20)
        key = default_key_path(p.backend)
    assert key.exists() and (key.stat().st_mode & 0o077) == 0
    assert not any(f.suffix == ".key" for f in db.parent.iterdir())


def test_a_re_signed_rewrite_is_caught_through_the_verifiers_state(tmp_path: Path) -> None:
    """An attacker with the file and a key of their own rewrites from the middle and signs new
    checkpoints: the verifier's confirmed checkpoint (outside the database) no longer matches,
    and the checkpoints are not signed by the log's key."""
    db = str(tmp_path / "log.db")
    with Plaudit.open(db, checkpoint_every=50, checkpoint_seconds=0) as p:
        fill(p, 200)
        assert p.log.verify().ok
    with attacker(db) as raw:
        raw.execute("UPDATE plaudit_events SET payload = '{\"i\":-1}' WHERE seq = 120")
        raw.rehash_from(120)
    with Plaudit.open(db) as p:
        report = p.log.verify()
        assert not report.ok and report.mode == "full"  # the state no longer fits: full


def test_a_missing_key_is_never_replaced_silently(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    with Plaudit.open(db, checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 20)
        key = default_key_path(p.backend)
    key.rename(tmp_path / "safe.key")
    with Plaudit.open(db, checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 20, 21)  # appends go on, without checkpoints
        assert not key.exists()  # no new identity made behind the user's back
        report = p.log.verify()
        assert report.ok and report.signatures.startswith("not checked")
        assert str(key) in report.signatures
    assert main(["--db", db, "log", "key"]) == 2  # an error naming where it looked
    assert main(["--db", db, "log", "checkpoint"]) == 2
    (tmp_path / "safe.key").rename(key)  # restored: everything checks again
    with Plaudit.open(db) as p:
        assert p.log.verify(full=True).signatures.startswith("checked with key")


def test_a_copied_database_without_its_key_does_not_get_a_new_one(tmp_path: Path) -> None:
    src = tmp_path / "a" / "log.db"
    with Plaudit.open(src, checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 20)
    dst = tmp_path / "b"
    dst.mkdir()
    shutil.copy(src, dst / "log.db")
    assert main(["--db", str(dst / "log.db"), "log", "key"]) == 2
    with Plaudit.open(dst / "log.db") as p:
        assert not default_key_path(p.backend).exists()


def test_missing_or_unmounted_witnesses_warn_and_never_halt(tmp_path: Path) -> None:
    gone = tmp_path / "not-mounted"
    db = str(tmp_path / "log.db")
    with Plaudit.open(db, witness=[gone], checkpoint_every=5, checkpoint_seconds=0) as p:
        fill(p, 12)  # a checkpoint falls due: its witness copy is skipped with a warning
        assert p.ledger.record("successful_validation", "still records").points == 30
        report = p.log.verify()
        assert report.ok
        assert any(str(gone) in w for w in report.warnings)
    assert main(["--db", db, "log", "checkpoint", "--witness", str(gone)]) == 2


def test_a_new_store_with_a_witness_set_records(tmp_path: Path, monkeypatch: Any) -> None:
    witness = tmp_path / "w"
    witness.mkdir()
    monkeypatch.setenv("PLAUDIT_WITNESS", str(witness))
    db = str(tmp_path / "new.db")
    assert main(["--db", db, "ledger", "record", "-c", "successful_validation", "-a", "x"]) == 0


def test_a_new_witness_directory_gets_the_newest_checkpoint(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    with Plaudit.open(db) as p:
        fill(p, 5)
        p.log.checkpoint()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert main(["--db", db, "log", "checkpoint", "--witness", str(fresh)]) == 0
    assert [f for f in os.listdir(fresh) if f.endswith(".checkpoint")]


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("UPDATE plaudit_head SET tree_size = tree_size - 3", "tree_size"),
        ("UPDATE plaudit_head SET checkpoint_size = 0", "newest checkpoint"),
        ("UPDATE plaudit_head SET checkpoint_ms = checkpoint_ms + 1", "newest checkpoint"),
        ("UPDATE plaudit_checkpoints SET time_ms = time_ms + 1 WHERE size = 20", "does not match"),
        ("UPDATE plaudit_checkpoints SET root = ? WHERE size = 20", "does not match"),
        ("UPDATE plaudit_checkpoints SET note = 'garbage' WHERE size = 20", "malformed"),
        ("DELETE FROM plaudit_checkpoints WHERE size = 30", "newest checkpoint"),
    ],
)
def test_verify_checks_every_stored_field(db_url: str, sql: str, what: str) -> None:
    with Plaudit.open(db_url, checkpoint_every=10, checkpoint_seconds=0) as p:
        for start in (1, 11, 21):  # checkpoints of 10, 20 and 30 events
            fill(p, 10, start)
        with attacker(db_url) as raw:
            raw.execute(sql, (b"\x07" * 32,) if "?" in sql else ())
        for full in (True, False):
            report = p.log.verify(full=full)
            assert not report.ok, (sql, report)
            assert what in (report.reason or ""), report.reason


def test_the_head_edit_does_not_let_appends_store_wrong_nodes(db_url: str) -> None:
    with Plaudit.open(db_url, checkpoint_every=0, checkpoint_seconds=0) as p:
        fill(p, 30)
        with attacker(db_url) as raw:
            raw.execute("UPDATE plaudit_head SET tree_size = 25")
        assert "tree_size" in (p.log.verify().reason or "")


def test_a_power_cut_never_leaves_a_witness_ahead(tmp_path: Path, monkeypatch: Any) -> None:
    """A checkpoint signed in a commit that did not wait for the disk (a bandit select's, or
    any commit with durability="normal") reaches the witnesses only once the prefix it covers
    is on disk. The test keeps, at every witness write, the files as a power cut then could
    leave them (the WAL cut to its last synced length), and verifies each with the witness."""
    import plaudit.store.checkpointing as ckmod

    db = tmp_path / "log.db"
    witness = tmp_path / "w"
    witness.mkdir()
    synced = {"wal": 0}
    real_fsync = os.fsync

    def tracking_fsync(fd: int) -> None:
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("-wal"):
            synced["wal"] = os.fstat(fd).st_size

    monkeypatch.setattr(os, "fsync", tracking_fsync)
    cuts: list[Path] = []
    real_publish = ckmod.Checkpointer.publish

    def publish(self: Any, ck: Any, **kw: Any) -> Any:
        cut = tmp_path / f"cut{len(cuts)}"
        cut.mkdir()
        shutil.copy(db, cut / "log.db")
        wal = Path(f"{db}-wal")
        if wal.exists():
            (cut / "log.db-wal").write_bytes(wal.read_bytes()[: synced["wal"]])
        cuts.append(cut)
        return real_publish(self, ck, **kw)

    monkeypatch.setattr(ckmod.Checkpointer, "publish", publish)
    with Plaudit.open(
        db, durability="normal", witness=[witness], checkpoint_every=10, checkpoint_seconds=0
    ) as p:
        fill(p, 35)
        key = default_key_path(p.backend)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert cuts
    for cut in cuts:
        monkeypatch.setenv(KEY_ENV, str(key))
        with Plaudit.open(cut / "log.db", witness=[witness]) as after:
            assert after.log.verify(full=True).ok, cut


_WRITER = """
import sys
from plaudit import Plaudit, make_event
db, witness = sys.argv[1], sys.argv[2]
with Plaudit.open(db, witness=[witness], checkpoint_every=3, checkpoint_seconds=0) as p:
    i = 0
    while True:
        p.log.append_batch([make_event("test.kill.v1", {"i": i, "j": j}) for j in range(2)])
        i += 1
        if i == 3:
            print("writing", flush=True)
"""


def test_kill_9_while_checkpoints_are_signed_and_witnessed(db_url: str, tmp_path: Path) -> None:
    """A writer killed at any moment (a checkpoint every 3 appends, so often while one is
    signed or copied to the witness) leaves the witness consistent with the log: a full
    verify with the witness passes after every kill, and the log goes on from there."""
    import random
    import signal
    import subprocess
    import sys
    import time

    witness = tmp_path / "w"
    witness.mkdir()
    with Plaudit.open(db_url, create=True) as p:
        fill(p, 1)
    rng = random.Random(7)
    lengths = []
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, db_url, str(witness)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        with Plaudit.open(db_url, witness=[witness]) as p:
            report = p.log.verify(full=True)
            assert report.ok, report
            assert report.witnesses and not report.warnings, report
            (seen,) = report.witnesses
            assert seen["problem"] is None and 0 < seen["size"] <= report.length, seen
            lengths.append(report.length)
    assert lengths == sorted(lengths) and lengths[-1] > lengths[0]


TABLES = ("plaudit_events", "plaudit_head", "plaudit_checkpoints", "plaudit_tree_nodes")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_any_single_byte_change_of_a_stored_row_is_found(tmp_path: Path, data: Any) -> None:
    """Change one byte of one column of one row of the log's tables: verify --full with the
    witness reports it; the default verify reports it when it lies after the newest
    checkpoint the verifier confirmed."""
    import sqlite3
    import uuid

    root = tmp_path / uuid.uuid4().hex
    root.mkdir()
    db, witness = root / "log.db", root / "w"
    witness.mkdir()
    with Plaudit.open(db, witness=[witness], checkpoint_every=100, checkpoint_seconds=0) as p:
        for start in range(1, 301, 100):  # checkpoints of 100, 200, 300; tree nodes from 256
            fill(p, 100, start)
        assert p.log.verify().ok  # confirms the checkpoint of 300
        fill(p, 40, 301)
    table = data.draw(st.sampled_from(TABLES))
    conn = sqlite3.connect(db, isolation_level=None)
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    cols = [c for c in cols if c not in ("one", "verified_ms")]
    rows = conn.execute(f"SELECT rowid, {', '.join(cols)} FROM {table}").fetchall()
    rowid, *values = data.draw(st.sampled_from(rows))
    i = data.draw(st.integers(0, len(cols) - 1))
    value = values[i]
    raw = value if isinstance(value, bytes) else str(value).encode()
    if not raw:
        return
    at = data.draw(st.integers(0, len(raw) - 1))
    flipped = bytearray(raw)
    flipped[at] ^= data.draw(st.integers(1, 255))
    new: Any = bytes(flipped)
    if not isinstance(value, bytes):
        try:
            new = (
                type(value)(bytes(flipped).decode())
                if isinstance(value, int)
                else bytes(flipped).decode()
            )
        except (UnicodeDecodeError, ValueError):
            return
    if new == value:
        return
    with attacker(str(db)):
        pass  # drops the append-only triggers
    try:
        conn.execute(f"UPDATE {table} SET {cols[i]} = ? WHERE rowid = ?", (new, rowid))
    except sqlite3.IntegrityError:
        return  # the database itself refuses the edit (a taken key): nothing to find
    finally:
        conn.close()
    with Plaudit.open(db, witness=[witness]) as p:
        report = p.log.verify(full=True)
        assert not report.ok, (table, cols[i], value, new)


def test_a_key_rotation_is_signed_witnessed_and_verifies(tmp_path: Path) -> None:
    from plaudit.store.rotation import ROTATION_TYPE

    witness = tmp_path / "w"
    witness.mkdir()
    db = str(tmp_path / "log.db")
    with Plaudit.open(db, witness=[witness], checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 10)
        fill(p, 10, 11)
        old = p.log.key_info()
        new = p.log.rotate_key()
        assert new.fingerprint != old.fingerprint
        fill(p, 10, 21)
        rotation = [e for e in p.log.replay(types=[ROTATION_TYPE])]
        assert len(rotation) == 1 and rotation[0].payload["old"] == old.verifier_key
        report = p.log.verify(full=True)
        assert report.ok, report
        path = default_key_path(p.backend)
        assert path.exists() and (tmp_path / "w").exists()
        retired = path.with_name(f"{path.name}.retired-{old.fingerprint[:16]}")
        assert retired.exists()  # the old key is kept, never deleted
    assert main(["--db", db, "log", "verify", "--full", "--witness", str(witness)]) == 0
    assert main(["--db", db, "log", "key", "--new"]) == 0  # and again


def test_a_forged_rotation_to_an_attackers_key_is_found(tmp_path: Path) -> None:
    """Someone with the database appends a rotation to a key of their own, signed with it:
    it does not chain to the log's key, and verify names its position."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from plaudit.events import make_event
    from plaudit.store.keys import LogKey
    from plaudit.store.rotation import ROTATION_TYPE, rotation_payload

    db = str(tmp_path / "log.db")
    with Plaudit.open(db, checkpoint_every=10, checkpoint_seconds=0) as p:
        fill(p, 10)
        mallory = LogKey(Ed25519PrivateKey.generate(), "mallory")
        other = LogKey(Ed25519PrivateKey.generate(), "other")
        r = p.log.append(make_event(ROTATION_TYPE, rotation_payload(mallory, other)))
        report = p.log.verify(full=True)
        assert not report.ok and report.first_bad == r.seq and "rotation" in (report.reason or "")


def test_check_proof_takes_both_bundles_and_the_key_as_printed(tmp_path: Path) -> None:
    import contextlib
    import io

    db = str(tmp_path / "log.db")
    with Plaudit.open(db, checkpoint_every=0, checkpoint_seconds=0) as p:
        fill(p, 20)
        old = p.log.checkpoint()
        fill(p, 10, 21)
        p.log.checkpoint()
    (tmp_path / "old.checkpoint").write_text(old.to_text())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--db", db, "log", "key"]) == 0
    (tmp_path / "log.pub").write_text(out.getvalue())  # `plaudit log key > log.pub`
    bundle = tmp_path / "cons.json"
    old_file = str(tmp_path / "old.checkpoint")
    assert main(["--db", db, "log", "consistency", old_file, "--out", str(bundle)]) == 0
    assert main(["log", "check-proof", str(bundle), "--key", str(tmp_path / "log.pub")]) == 0
    proof = tmp_path / "proof.json"
    assert main(["--db", db, "log", "prove", "e3", "--out", str(proof)]) == 0
    assert main(["log", "check-proof", str(proof), "--key", str(tmp_path / "log.pub")]) == 0


def test_a_plaudit_checkpoint_verifies_with_an_independent_c2sp_verifier(tmp_path: Path) -> None:
    """The note a witness receives is a C2SP signed note any verifier can check with the
    verifier key string `plaudit log key` prints (the verifier here is written from the
    specification, in tests/test_signed_note.py)."""
    from test_signed_note import spec_open

    w = tmp_path / "w"
    w.mkdir()
    with Plaudit.open(tmp_path / "log.db", witness=[w]) as p:
        fill(p, 5)
        ck = p.log.checkpoint()
        vkey = p.log.key_info().verifier_key
    files = [f for f in w.iterdir() if f.name.endswith(".checkpoint")]
    assert files and files[0].read_text() == ck.to_text()
    text, signers = spec_open(files[0].read_bytes(), [vkey])
    assert text.decode().splitlines()[1] == "5" and signers


def _held_lease(url: str) -> tuple[Any, Any]:
    """A thread holding the lease until the returned event is set: queued events wait."""
    import threading

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with Plaudit.open(url) as h, h.log.writer():
            holding.set()
            release.wait(30)

    th = threading.Thread(target=hold)
    th.start()
    assert holding.wait(30)
    return th, release


@pytest.mark.postgres
def test_an_enqueue_receipt_proves_sequencing_or_shows_a_drop_or_a_change(
    pg_url: str, monkeypatch: Any, tmp_path: Path
) -> None:
    from plaudit.events import prepare

    monkeypatch.setenv("PLAUDIT_HOST_GROUP", "0")
    with Plaudit.open(pg_url) as p:
        p.log.append(ev(0))
        th, release = _held_lease(pg_url)
        try:
            got = p.log.enqueue_batch([ev(1), ev(2), ev(3)])
            assert got.queued == 3 and got.receipt is not None
            pending = p.log.check_receipt(got.receipt)
            assert not pending.ok and {e.status for e in pending.events} == {"pending"}
            conn = p.backend.connection()
            conn.execute("DELETE FROM plaudit_intake WHERE id = 'e2'")
            forged = prepare(ev(3, note="forged"))
            conn.execute(
                "UPDATE plaudit_intake SET payload = %s, content_digest = %s WHERE id = 'e3'",
                (forged.payload_text, forged.content_digest),
            )
        finally:
            release.set()
            th.join(30)
        p.log.sequence()
        report = p.log.check_receipt(got.receipt)
        assert not report.ok
        assert [e.status for e in report.events] == ["sequenced", "dropped", "changed"]
    # The CLI says the same, with exit 1.
    tmp = tmp_path / "receipt"
    tmp.write_text(got.receipt)
    assert main(["--db", pg_url, "log", "check-receipt", str(tmp)]) == 1
    forged_receipt = got.receipt.replace(" e1\n", " e9\n")
    tmp.write_text(forged_receipt)
    assert main(["--db", pg_url, "log", "check-receipt", str(tmp)]) == 5  # not the log's


def test_sqlite_appends_need_no_receipt(tmp_path: Path) -> None:
    with Plaudit.open(tmp_path / "log.db") as p:
        got = p.log.enqueue_batch([ev(1)])
        assert got.results[0].status == "appended" and got.receipt is None


def test_writers_that_sign_and_events_nobody_signed(db_url: str, tmp_path: Path) -> None:
    """Events a registered writer signed pass `verify --writers`; an event inserted by a
    database user (here, appended by a handle without a writer key, as an intake row injected
    behind plaudit would be sequenced) is reported with its position."""
    key_file = tmp_path / "alice.key"
    assert main(["log", "writers", "new", "alice", "--out", str(key_file)]) == 0
    assert (key_file.stat().st_mode & 0o077) == 0
    with Plaudit.open(db_url, writer_key=str(key_file)) as alice:
        vkey = str(alice.log.core.signer.verifier)  # type: ignore[union-attr]
        alice.log.register_writer(vkey)
        fill(alice, 5)
        alice.ledger.record("successful_validation", "signed through a writer function too")
        report = alice.log.verify(writers=True)
        assert report.ok, report
        assert report.writers is not None and report.writers["unsigned"] == 0
    with Plaudit.open(db_url) as anyone:  # no writer key
        r = anyone.log.append(ev(99))
        report = anyone.log.verify(writers=True)
        assert not report.ok and report.first_bad == r.seq
        assert "no writer signature" in (report.reason or "")
        assert anyone.log.verify().ok  # the chain itself is whole
    assert main(["--db", db_url, "log", "verify", "--writers"]) == 1


def test_a_writer_signature_does_not_change_an_events_identity(tmp_path: Path) -> None:
    """A retry of an event by another writer (or none) is the same event: `present`."""
    a = tmp_path / "a.key"
    main(["log", "writers", "new", "a", "--out", str(a)])
    db = str(tmp_path / "log.db")
    with Plaudit.open(db, writer_key=str(a)) as p:
        first = p.log.append(ev(1))
    with Plaudit.open(db) as p:
        again = p.log.append(ev(1))
    assert (first.status, again.status, again.seq) == ("appended", "present", first.seq)

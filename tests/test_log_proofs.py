"""The Merkle tree, checkpoints, witnesses, incremental verify and proofs, wired into a store.

The pure pieces (hashing, proofs, bundles, witness files) are tested in test_merkle.py,
test_proofs.py and test_witness.py; here they meet real stores on both backends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _logtools import attacker, ev
from plaudit import Plaudit
from plaudit.cli import main
from plaudit.store.merkle import STORE_LEVEL, CompactRange, leaf_hashes
from plaudit.store.witness import newest_checkpoint

KEY_ENV = "PLAUDIT_SIGNING_KEY"


@pytest.fixture
def keyed(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store URL whose signing key is known on both backends (PostgreSQL needs it given)."""
    if db_url.startswith("postgresql"):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        path = tmp_path / "log.key"
        path.write_bytes(pem)
        monkeypatch.setenv(KEY_ENV, str(path))
    else:
        monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("PLAUDIT_WITNESS", raising=False)
    return db_url


def chain_hashes(p: Plaudit) -> list[bytes]:
    with p.log.reading() as view:
        n, _ = view.head()
        return [h for _, h in view.hashes(1, n)]


def test_the_sequencer_keeps_the_tree(keyed: str) -> None:
    """Batches and single appends, across tiles: the head's compact range and every stored
    node equal a tree built from scratch over the chain hashes."""
    with Plaudit.open(keyed, checkpoint_every=0, checkpoint_seconds=0) as p:
        p.log.append_batch([ev(i) for i in range(1, 300)])
        for i in range(300, 320):
            p.log.append(ev(i))
        p.log.append_batch([ev(i) for i in range(320, 700)])
        ext = CompactRange.empty().extend(leaf_hashes(chain_hashes(p)))
        with p.backend.read() as tx:
            state = p.backend.ops.head(tx)
            nodes = {
                (int(a), int(b)): bytes(h)
                for a, b, h in tx.fetchall("SELECT level, idx, hash FROM plaudit_tree_nodes")
            }
        assert state.tree_size == 699 and state.compact_range() == ext.range
        assert nodes == {(n.level, n.index): n.hash for n in ext.nodes}
        assert min(level for level, _ in nodes) == STORE_LEVEL


def test_checkpoints_come_every_n_events(keyed: str) -> None:
    with Plaudit.open(keyed, checkpoint_every=100, checkpoint_seconds=0) as p:
        for start in range(0, 350, 50):
            p.log.append_batch([ev(i) for i in range(start + 1, start + 51)])
        with p.backend.read() as tx:
            sizes = [int(r[0]) for r in tx.fetchall("SELECT size FROM plaudit_checkpoints")]
        assert sizes == [100, 200, 300]
        report = p.log.verify(full=True)
        assert report.ok and report.checkpoints == 3


def test_verify_is_incremental_from_the_confirmed_checkpoint(keyed: str) -> None:
    with Plaudit.open(keyed, checkpoint_every=50, checkpoint_seconds=0) as p:
        p.log.append_batch([ev(i) for i in range(1, 201)])
        first = p.log.verify()
        assert first.ok and first.mode == "full"
        p.log.append_batch([ev(i) for i in range(201, 211)])
        second = p.log.verify()
        assert second.ok and second.mode == "incremental" and second.from_checkpoint == 200
        # An edit after the confirmed checkpoint is caught incrementally...
        with attacker(keyed) as raw:
            raw.execute("UPDATE plaudit_events SET payload = '{\"i\":0}' WHERE seq = 205")
        late = p.log.verify()
        assert not late.ok and late.first_bad == 205 and late.mode == "incremental"
    with Plaudit.open(keyed, checkpoint_every=50, checkpoint_seconds=0) as p:
        with attacker(keyed) as raw:  # undo it, then damage history before the checkpoint
            raw.execute(
                "UPDATE plaudit_events SET payload = ? WHERE seq = 205",
                (json.dumps({"i": 205}, separators=(",", ":")),),
            )
            raw.execute("UPDATE plaudit_events SET payload = '{\"i\":0}' WHERE seq = 17")
        assert p.log.verify().ok  # ...one before it is left to --full,
        full = p.log.verify(full=True)
        assert not full.ok and full.first_bad == 17  # which names it.


def _rewrite_everything(raw: Any, *, drop_last: int = 0) -> None:
    if drop_last:
        (n,) = raw.execute("SELECT MAX(seq) FROM plaudit_events")[0]
        raw.execute("DELETE FROM plaudit_events WHERE seq > ?", (n - drop_last,))
    raw.execute("UPDATE plaudit_events SET payload = '{\"i\":-1}' WHERE seq = 3")
    raw.rehash_from(1)  # chain, tree and head rebuilt; the store's checkpoints deleted


@pytest.mark.parametrize("drop_last", [0, 5], ids=["rewrite", "truncate-and-rewrite"])
def test_a_rewrite_the_database_cannot_see_is_caught_through_a_witness(
    keyed: str, tmp_path: Path, drop_last: int
) -> None:
    witness = tmp_path / "witness"
    witness.mkdir()
    with Plaudit.open(keyed, witness=[witness], checkpoint_every=20, checkpoint_seconds=0) as p:
        p.log.append_batch([ev(i) for i in range(1, 61)])
        assert p.log.verify().ok
        with attacker(keyed) as raw:
            _rewrite_everything(raw, drop_last=drop_last)
    with Plaudit.open(keyed) as bare:  # without the witness, nothing in the database tells
        assert bare.log.verify(full=True).ok
    with Plaudit.open(keyed, witness=[witness]) as p:
        report = p.log.verify(full=True)
        assert not report.ok
        assert "witness" in (report.reason or "")
        assert ("removed" if drop_last else "rewritten") in (report.reason or "")
    assert main(["log", "verify", "--db", keyed, "--witness", str(witness)]) == 1


def test_prove_and_check_a_bundle_from_the_cli(
    keyed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Plaudit.open(keyed) as p:
        p.log.append_batch([ev(i) for i in range(1, 41)])
    bundle = tmp_path / "e7.json"
    assert main(["log", "prove", "--db", keyed, "e7", "--out", str(bundle)]) == 0
    assert main(["log", "key", "--db", keyed, "--json"]) == 0
    capsys.readouterr()
    assert main(["log", "check-proof", str(bundle), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["failed"] is None
    data = json.loads(bundle.read_text())
    data["audit_path"][0] = "00" * 32
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["log", "check-proof", str(bad)]) == 1
    assert "FAILED (" in capsys.readouterr().out
    assert main(["log", "prove", "--db", keyed, "no-such-event"]) == 4


def test_consistency_with_an_old_checkpoint(keyed: str, tmp_path: Path) -> None:
    witness = tmp_path / "w"
    witness.mkdir()
    with Plaudit.open(keyed, witness=[witness], checkpoint_every=0, checkpoint_seconds=0) as p:
        p.log.append_batch([ev(i) for i in range(1, 31)])
        old = p.log.checkpoint()
        p.log.append_batch([ev(i) for i in range(31, 90)])
        fp = p.log.key_info().fingerprint
    found = newest_checkpoint(witness, fp)
    assert found.checkpoint == old and found.path is not None
    assert main(["log", "consistency", "--db", keyed, found.path]) == 0
    with attacker(keyed) as raw:
        _rewrite_everything(raw)
    assert main(["log", "consistency", "--db", keyed, found.path]) == 5  # IntegrityError


def test_http_checkpoint_proof_and_consistency(keyed: str) -> None:
    from starlette.testclient import TestClient

    from plaudit.server.app import create_app
    from plaudit.store.proofs import check_consistency, check_proof

    with Plaudit.open(keyed, checkpoint_every=0, checkpoint_seconds=0) as p:
        p.log.append_batch([ev(i) for i in range(1, 21)])
        c = TestClient(create_app(p))
        assert c.get("/v1/log/checkpoint").status_code == 404
        assert c.get("/v1/log/proof/e3").status_code == 404  # nothing signed yet: GET never signs
        signed = c.post("/v1/log/checkpoint")
        assert signed.status_code == 200 and signed.text.startswith("plaudit-checkpoint v1\n")
        assert c.get("/v1/log/checkpoint").text == signed.text
        proof = c.get("/v1/log/proof/e3")
        assert proof.status_code == 200 and check_proof(proof.content).ok
        cons = c.get("/v1/log/consistency", params={"from": 7})
        assert cons.status_code == 200 and check_consistency(cons.content).ok
        assert c.get("/v1/log/consistency", params={"from": 99}).status_code == 409
        assert c.get("/v1/log/verify", params={"full": "true"}).json()["ok"] is True


def test_without_a_key_postgres_goes_without_automatic_checkpoints(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with Plaudit.open(pg_url, checkpoint_every=1) as p:
        p.log.append_batch([ev(i) for i in range(1, 5)])  # appends still work
        assert p.log.latest_checkpoint() is None
        assert p.log.verify().ok
    assert main(["log", "checkpoint", "--db", pg_url]) == 2
    assert KEY_ENV in capsys.readouterr().err


def test_the_key_is_loaded_ahead_of_the_first_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the last tenth before the first count-triggered checkpoint, a thread loads the
    key, so the append that signs does not pay for it; before that, nothing is loaded."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    db = str(tmp_path / "ahead.db")
    with Plaudit.open(db, checkpoint_every=100, checkpoint_seconds=0) as p:
        ck = p.log.checkpointer
        p.log.append_batch([ev(i) for i in range(1, 85)])
        assert ck._key is None and not Path(db + ".key").exists()
        p.log.append(ev(95))  # size 85: not yet within a tenth of 100
        assert ck._key is None
        p.log.append_batch([ev(i) for i in range(85, 95)])  # size 95
        p.log.append(ev(96))
        deadline = time.monotonic() + 10
        while ck._key is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ck._key is not None and Path(db + ".key").exists()
        assert p.log.latest_checkpoint() is None  # loaded, not signed
        p.log.append_batch([ev(i) for i in range(97, 101)])
        assert p.log.latest_checkpoint() is not None
        assert p.log.verify(full=True).ok


def test_prepare_loads_the_key_unless_checkpoints_are_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    off = str(tmp_path / "off.db")
    with Plaudit.open(off, checkpoint_every=0, checkpoint_seconds=0) as p:
        p.log.checkpointer.prepare()
        assert p.log.checkpointer._key is None and not Path(off + ".key").exists()
    on = str(tmp_path / "on.db")
    with Plaudit.open(on) as p:
        p.log.checkpointer.prepare()
        assert p.log.checkpointer._key is not None and Path(on + ".key").exists()


def test_prepare_without_a_postgres_key_turns_checkpoints_off_quietly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with Plaudit.open(pg_url) as p:
        p.log.checkpointer.prepare()
        assert p.log.checkpointer._no_key is not None
        p.log.append(ev(1))
        assert p.log.latest_checkpoint() is None


def test_a_missing_key_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "p.db")
    with Plaudit.open(db) as p:
        p.log.append(ev(1))
    missing = tmp_path / "nope.key"
    os.environ[KEY_ENV] = str(missing)
    try:
        assert main(["log", "checkpoint", "--db", db]) == 2
    finally:
        del os.environ[KEY_ENV]
    assert str(missing) in capsys.readouterr().err


CHECKPOINTING_WRITER = r"""
import sys
from plaudit import Plaudit
db, witness, name = sys.argv[1], sys.argv[2], sys.argv[3]
with Plaudit.open(db, witness=[witness], checkpoint_every=1, checkpoint_seconds=0) as p:
    i = 0
    while True:
        p.log.append({"id": f"{name}-{i}", "type": "test.ck.v1", "session_id": "s",
                      "source": "t", "ts_ms": 1, "payload": {"i": i}})
        i += 1
        if i == 3:
            print("going", flush=True)
"""


def test_kill_9_during_checkpoint_writes(sqlite_url: str, tmp_path: Path) -> None:
    """Writers sign (and copy to the witness) a checkpoint on every append, and are killed
    mid-way, three times: the log and the witness stay readable and verify passes."""
    witness = tmp_path / "w"
    witness.mkdir()
    with Plaudit.open(sqlite_url) as p:
        p.log.append(ev(0))
    for r in range(3):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CHECKPOINTING_WRITER, sqlite_url, str(witness), f"r{r}w{k}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for k in range(2)
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "going"
        time.sleep(0.3 + 0.2 * r)
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with Plaudit.open(sqlite_url, witness=[witness]) as p:
            report = p.log.verify(full=True)
            assert report.ok, report
            fp = p.log.key_info().fingerprint
            seen = newest_checkpoint(witness, fp)
            assert seen.checkpoint is not None and seen.checkpoint.size <= report.length

"""Group commit across the processes of one host that share one PostgreSQL log.

Every append on PostgreSQL is a commit with a WAL flush, and a sequencing pass per batch of
intake. When several processes of one host append at once, each paying for its own commit, the
cost per event is a few times a plain insert's. Here the processes of a host that open the same
store elect one of them, the **host leader**, with a lock file; the others (**followers**) send
their append calls to it over a Unix socket, and it writes everything that arrived in one
transaction under the sequencer lease (the same group commit its own threads use), then answers
each caller with its positions. So N processes of a host cost one commit per group, not N.

What keeps this safe:

* **Nothing depends on it.** The leader writes through the ordinary sequencing path (the lease,
  the chain, the projections). Hosts, and processes that cannot reach a leader, keep using the
  lease and the intake as before; two leaders for one store (say, two spellings of one DSN) are
  two writers like any other.
* **Idempotency makes a retry safe.** A follower whose leader goes away mid-call (killed,
  closed) does not know whether its events were committed, so it writes them itself: an event
  the leader committed comes back ``present`` at the same position. A follower is answered
  only after the leader's commit, so an acknowledged event is durable as before.
* **Same projections.** A leader applies its own process's projections. A follower whose
  process registered a different set keeps writing itself (the handshake compares them).
* **Who may connect.** The socket lives in a directory only the user can enter, so only the
  user's own processes reach it; the leader trusts their events as it trusts its own threads'.

The lock is a POSIX record lock (`fcntl.lockf`), which belongs to a process: a child made by
`fork` does not inherit it, and the kernel drops it when the leader dies, so the next process
to ask takes over (removing the dead leader's socket file, which is its own).

Turn it off with ``PLAUDIT_HOST_GROUP=0`` (each process then writes for itself).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import selectors
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from plaudit.events import Prepared
from plaudit.store.deadlines import process_state

#: Bumped when the frames change: a leader and a follower of different versions do not talk.
PROTOCOL = 2
ENV = "PLAUDIT_HOST_GROUP"
#: A follower that found no leader (or lost one) writes for itself, and asks again after this.
RETRY_S = 0.05
#: A follower whose leader did not answer a call within the store's deadline writes for
#: itself and checks the leader this often in the background (a stopped leader's socket still
#: accepts connections: only an answer proves it is back). A stopped leader so costs a
#: follower the deadline once, not on every call.
PROBE_S = 1.0
#: While it waits for an answer, a follower checks this often whether the leader's process
#: was stopped; one that was is given up on at once.
ANSWER_POLL_S = 0.05
#: The most bytes one frame may carry (a follower's oversize call is written locally).
FRAME_LIMIT = 64 << 20
_LEN = struct.Struct("!I")
#: Stores this process leads. A record lock does not keep a process out of its own lock, so a
#: second opening of one store in this process must know it from here (and then follows).
_LEADING: set[str] = set()
_LEADING_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    global _LEADING_LOCK
    _LEADING_LOCK = threading.Lock()  # another thread may have held it at the fork
    _LEADING.clear()


os.register_at_fork(after_in_child=_forget_after_fork)

#: A handler that writes one group: the calls' (prepared events, on_conflict) in order, and
#: returns per call either its result (a `BatchResult`) or the exception it raised.
Commit = Callable[[list[tuple[list[Prepared], str]]], list[Any]]


class _Local:
    """A call of the leader's own process, written in the leader thread's next group (so the
    process's threads and its followers share commits instead of taking turns)."""

    __slots__ = ("done", "on_conflict", "outcome", "prepared")

    def __init__(self, prepared: list[Prepared], on_conflict: str) -> None:
        self.prepared = prepared
        self.on_conflict = on_conflict
        self.outcome: Any = None
        self.done = threading.Event()


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def _runtime_dir() -> Path:
    """A directory only this user can enter (the socket's permission is the directory's)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"plaudit-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{path} is not a private directory of this user")
    return path


def _name_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def lock_path(key: str) -> Path:
    """The lock file whose holder leads the processes of this host for store `key`."""
    return _runtime_dir() / f"{_name_of(key)}.lock"


def _holder_pid(lock: Path) -> int:
    """The pid the leader wrote into its lock file (0: unknown)."""
    try:
        text = lock.read_text().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


def _frame(obj: Any) -> bytes:
    body = msgspec.msgpack.encode(obj)
    return _LEN.pack(len(body)) + body


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the host leader closed the connection")
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> Any:
    (size,) = _LEN.unpack(_read_exact(sock, _LEN.size))
    if size > FRAME_LIMIT:
        raise ConnectionError("oversize frame")
    return msgspec.msgpack.decode(_read_exact(sock, size))


class _Call(msgspec.Struct, array_like=True):
    """One append call as it travels to the leader."""

    on_conflict: str
    prepared: list[Prepared]


class HostGroup:
    """This process's part in its host's group commit for one store: leader or follower."""

    def __init__(
        self, key: str, deadline_s: float, fingerprint: Callable[[], str], commit: Commit
    ) -> None:
        digest = _name_of(key)
        self._deadline_s = deadline_s
        #: Set while the leader failed to answer within the deadline (see PROBE_S).
        self._suspect = False
        #: The leader's pid, from its greeting (same host: its state can be read).
        self._leader_pid = 0
        self._name = digest
        self._fingerprint = fingerprint
        self._commit = commit
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pid = os.getpid()
        self._next_try = 0.0
        self._lock_fd: int | None = None
        self._server: _Server | None = None
        #: False once a leader refused this process (other projections or protocol).
        self._usable = True
        self._closed = False

    def submit(self, prepared: list[Prepared], on_conflict: str) -> Any:
        """This call's outcome through the host's group commit: a `BatchResult`, or the
        exception the write raised; None: write it yourself (no leader answers, or this
        process leads alone)."""
        from plaudit.store.idempotency import AppendResult, BatchResult

        if self.leading:
            return self.submit_local(prepared, on_conflict)
        try:
            triples = self.forward(prepared, on_conflict)
        except Exception as exc:
            return exc
        if triples is None:
            return None
        return BatchResult([AppendResult(i, s, st) for i, s, st in triples])

    # -- follower side --------------------------------------------------------------------
    def forward(self, prepared: list[Prepared], on_conflict: str) -> list[Any] | None:
        """Send one append call to the host leader and return its answer: (id, seq, status)
        triples, or raise what the leader's write raised. None: write it yourself (this
        process leads, no leader answers, or it went away mid-call)."""
        if os.getpid() != self._pid:
            self._after_fork()
        if self._closed or not self._usable or self._server is not None or self._suspect:
            return None
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._connect()
            if sock is None:
                return None
        try:
            sock.settimeout(self._deadline_s)
            sock.sendall(_frame(_Call(on_conflict, prepared)))
            self._await_answer(sock, self._deadline_s)
            kind, value = _read_frame(sock)
        except TimeoutError:
            self._drop(sock)
            self._distrust()
            return None
        except (OSError, ConnectionError, ValueError, msgspec.DecodeError):
            self._drop(sock)
            return None
        if kind == "ok":
            return value  # type: ignore[no-any-return]
        if kind == "error":
            raise _rebuild(value)
        if kind == "conflict":
            from plaudit.errors import ConflictError

            raise ConflictError(value)
        return None  # the leader's write failed for a reason of its own: try it here

    def _await_answer(self, sock: socket.socket, timeout: float) -> None:
        """Wait until the leader's answer starts to arrive: at most `timeout`, and not at all
        once the leader's process is seen stopped (SIGSTOP). Raises TimeoutError."""
        import select

        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if select.select([sock], [], [], min(ANSWER_POLL_S, left))[0]:
                sock.settimeout(max(left, 0.001))
                return
            if self._leader_pid and process_state(self._leader_pid) == "stopped":
                raise TimeoutError

    def _distrust(self) -> None:
        """The leader did not answer in time (stopped?): write for ourselves until a probe in
        the background finds it answering again."""
        with self._lock:
            if self._suspect:
                return
            self._suspect = True
        threading.Thread(target=self._probe, name="plaudit-leader-probe", daemon=True).start()

    def _probe(self) -> None:
        while not self._closed:
            time.sleep(PROBE_S)
            try:
                sock = self._handshake(min(PROBE_S, self._deadline_s))
            except TimeoutError:
                continue
            if sock is not None:
                sock.close()
                self._suspect = False
                return
            with self._lock:  # the leader may be gone (its lock free): lead, or follow anew
                if self._server is None and self._try_lead(_runtime_dir()):
                    self._suspect = False
                    return

    def _handshake(self, timeout: float) -> socket.socket | None:
        """A connection to the leader that answered the greeting within `timeout` (None: no
        leader listens); raises TimeoutError when one accepted but did not answer (a
        stopped leader's socket still accepts: its pid, from the lock file, tells sooner)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._leader_pid = _holder_pid(_runtime_dir() / f"{self._name}.lock")
            sock.settimeout(timeout)
            sock.connect(str(_runtime_dir() / f"{self._name}.sock"))
            sock.sendall(_frame((PROTOCOL, self._fingerprint())))
            self._await_answer(sock, timeout)
            ok, self._leader_pid = _read_frame(sock)
        except TimeoutError:
            sock.close()
            raise
        except (OSError, ConnectionError, ValueError, TypeError, msgspec.DecodeError):
            sock.close()
            return None
        if ok != "ok":
            sock.close()
            self._usable = False  # this leader will not take our calls: write for ourselves
            return None
        return sock

    def _connect(self) -> socket.socket | None:
        now = time.monotonic()
        if now < self._next_try:
            return None
        self._next_try = now + RETRY_S
        try:
            where = _runtime_dir()
        except OSError:
            self._usable = False
            return None
        with self._lock:
            if self._server is None and self._try_lead(where):
                return None
        if self._server is not None:
            return None
        try:
            sock = self._handshake(self._deadline_s)
        except TimeoutError:
            self._distrust()
            return None
        if sock is None:
            return None
        self._local.sock = sock
        return sock

    def _drop(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.close()
        self._local.sock = None

    # -- leader side ----------------------------------------------------------------------
    def _try_lead(self, where: Path) -> bool:
        with _LEADING_LOCK:
            if self._name in _LEADING:
                return False
            try:
                led = self._lead(where)
            except OSError:  # no lock file here (a read-only or full disk): write for ourselves
                self._usable = False
                return False
            if led:
                _LEADING.add(self._name)
            return led

    def _lead(self, where: Path) -> bool:
        import fcntl

        fd = os.open(where / f"{self._name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        path = where / f"{self._name}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a dead leader's socket: the lock says nobody serves it
            listener.bind(str(path))
            listener.listen(64)
        except OSError:  # e.g. a socket path over the system's limit
            listener.close()
            os.close(fd)
            self._usable = False
            return False
        self._lock_fd = fd
        with contextlib.suppress(OSError):  # followers read who leads, to tell it is stopped
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._server = _Server(listener, path, self._fingerprint, self._commit)
        self._server.start()
        return True

    @property
    def leading(self) -> bool:
        return self._server is not None

    @property
    def alone(self) -> bool:
        """Leading with no follower connected."""
        return self._server is not None and not self._server.followers

    @property
    def grouping(self) -> bool:
        """Leading with followers connected: this process's calls join the leader's groups."""
        server = self._server
        return server is not None and server.followers > 0

    def submit_local(self, prepared: list[Prepared], on_conflict: str) -> Any:
        """Have the leader thread write this process's own call in its next group: the
        call's result, or the exception it raised. None: not leading (write it yourself)."""
        server = self._server
        if server is None or os.getpid() != self._pid or not server.followers:
            return None  # alone: a hand-over to the leader thread would only add latency
        call = _Local(prepared, on_conflict)
        if not server.take_local(call):
            return None
        call.done.wait()
        return call.outcome

    def _after_fork(self) -> None:
        """A forked child has none of the parent's threads or locks: start afresh."""
        self._pid = os.getpid()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._server = None
        with _LEADING_LOCK:
            _LEADING.discard(self._name)  # the parent's, not this process's
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # the record lock stays the parent's
            self._lock_fd = None

    def close(self) -> None:
        """Stop leading (answering what is under way first) and drop this thread's link."""
        self._closed = True
        if os.getpid() != self._pid:
            return
        sock = getattr(self._local, "sock", None)
        if sock is not None:
            self._drop(sock)
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            with _LEADING_LOCK:
                _LEADING.discard(self._name)
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None


class _Server:
    """The leader's thread: reads every call that has arrived, writes them as one group, and
    answers each. Calls arrive while a group commits, so groups grow with the load."""

    def __init__(
        self,
        listener: socket.socket,
        path: Path,
        fingerprint: Callable[[], str],
        commit: Commit,
    ) -> None:
        self._listener = listener
        self._path = path
        self._fingerprint = fingerprint
        self._commit = commit
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="plaudit-host-leader", daemon=True)
        self._wake_r, self._wake_w = socket.socketpair()
        self._inode = os.stat(path).st_ino
        self._decoder = msgspec.msgpack.Decoder(_Call)
        self._inbox = bytearray(64 << 10)
        self._inbox_view = memoryview(self._inbox)
        self._locals: list[_Local] = []
        #: Follower connections open now.
        self.followers = 0
        self._locals_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def take_local(self, call: _Local) -> bool:
        with self._locals_lock:
            if self._stopped:
                return False
            wake = not self._locals
            self._locals.append(call)
        if wake:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        return True

    def stop(self) -> None:
        with self._locals_lock:
            self._stopped = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(10.0)
        with contextlib.suppress(OSError):
            # Only if it is still ours: a new leader may have bound the path already.
            if self._path.exists() and self._path.stat().st_ino == self._inode:
                self._path.unlink()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        buffers: dict[socket.socket, bytearray] = {}
        greeted: set[socket.socket] = set()
        try:
            while not self._stopped:
                calls: list[tuple[socket.socket, _Call]] = []
                for key, _ in sel.select(timeout=1.0):
                    sock: socket.socket = key.fileobj  # type: ignore[assignment]
                    if sock is self._listener:
                        with contextlib.suppress(OSError):
                            conn, _ = self._listener.accept()
                            sel.register(conn, selectors.EVENT_READ, None)
                            buffers[conn] = bytearray()
                        continue
                    if sock is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                        continue
                    if not self._receive(sock, buffers, greeted, calls):
                        sel.unregister(sock)
                        buffers.pop(sock, None)
                        greeted.discard(sock)
                        self.followers = len(greeted)
                        sock.close()
                with self._locals_lock:
                    local, self._locals = self._locals, []
                if calls or local:
                    self._answer(calls, local)
        finally:
            self.followers = 0
            # However the thread ends, nobody is left waiting: followers see their connection
            # close and write for themselves; this process's own calls are told to.
            with self._locals_lock:
                self._stopped = True
                local, self._locals = self._locals, []
            for call in local:  # stopped: they write for themselves
                call.outcome = None
                call.done.set()
            for sock in list(buffers):
                with contextlib.suppress(OSError):
                    sock.close()
            sel.close()
            self._listener.close()
            self._wake_r.close()
            self._wake_w.close()

    def _receive(
        self,
        sock: socket.socket,
        buffers: dict[socket.socket, bytearray],
        greeted: set[socket.socket],
        calls: list[tuple[socket.socket, _Call]],
    ) -> bool:
        """Read what `sock` sent; False when it closed or broke the protocol."""
        try:
            # Into one reused buffer: `recv(n)` allocates n bytes per call, and at a size the
            # allocator maps afresh each time that cost the leader thread more than the call.
            n = sock.recv_into(self._inbox)
        except OSError:
            return False
        if not n:
            return False
        buf = buffers[sock]
        buf += self._inbox_view[:n]
        while len(buf) >= _LEN.size:
            (size,) = _LEN.unpack_from(buf)
            if size > FRAME_LIMIT:
                return False
            if len(buf) < _LEN.size + size:
                break
            body = bytes(buf[_LEN.size : _LEN.size + size])
            del buf[: _LEN.size + size]
            try:
                if sock not in greeted:
                    version, fingerprint = msgspec.msgpack.decode(body)
                    same = version == PROTOCOL and fingerprint == self._fingerprint()
                    sock.sendall(_frame(("ok" if same else "refused", os.getpid())))
                    if not same:
                        return False
                    greeted.add(sock)
                    self.followers = len(greeted)
                else:
                    calls.append((sock, self._decoder.decode(body)))
            except (OSError, ValueError, msgspec.DecodeError):
                return False
        return True

    def _answer(self, calls: list[tuple[socket.socket, _Call]], local: list[_Local]) -> None:
        work = [(c.prepared, c.on_conflict) for _, c in calls]
        work += [(c.prepared, c.on_conflict) for c in local]
        try:
            outcomes = self._commit(work)
        except BaseException as exc:  # the group's transaction failed: every caller finds out
            outcomes = [exc] * len(work)
            if not isinstance(exc, Exception):
                for call in local:
                    call.done.set()  # outcome None: write it yourself
                raise
        from plaudit.errors import ConflictError, PlauditError

        for (sock, _), outcome in zip(calls, outcomes, strict=False):
            if isinstance(outcome, ConflictError):
                reply: Any = ("conflict", outcome.event_id)
            elif isinstance(outcome, PlauditError):
                reply = ("error", (type(outcome).__name__, str(outcome)))
            elif isinstance(outcome, BaseException):
                reply = ("retry", str(outcome))
            else:
                reply = ("ok", [(a.id, a.seq, a.status) for a in outcome.results])
            with contextlib.suppress(OSError):
                sock.sendall(_frame(reply))
        for call, outcome in zip(local, outcomes[len(calls) :], strict=True):
            call.outcome = outcome
            call.done.set()


def _rebuild(value: Any) -> BaseException:
    """The leader's error as this process would have raised it (a plaudit error class by
    name; anything else as an IntegrityError with the leader's message)."""
    from plaudit import errors

    name, message = value
    cls = getattr(errors, str(name), None)
    if isinstance(cls, type) and issubclass(cls, errors.PlauditError):
        try:
            return cls(str(message))
        except TypeError:
            pass
    return errors.IntegrityError(str(message))

"""The egress proxy: one event-loop thread on the host, one listening Unix socket per sandbox.

``EgressHub(settings).open_gate()`` makes a socket in a fresh private directory (mode 0700)
before the sandbox starts, for the sandbox to mount at ``/run/codemode/egress.sock``. Each
gate knows its sandbox's session (``gate.session``), so a connection is attributed without any
credential inside the sandbox. Every connection is reported to ``hub.sink`` when it ends:
those refused before any reading (503, over ``max_connections``) and those that never sent a
whole request included.

The socket's directory is made on a tmpfs (``/dev/shm``) where there is one: a bind mount shows
its source's path within its filesystem in the sandbox's ``/proc/self/mountinfo``, and on a
tmpfs that path is just ``/codemode-egress-<random>/egress.sock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from codemode.egress.connection import Connection, Policy, linger
from codemode.egress.heads import MAX_HEAD_BYTES, refusal_response
from codemode.egress.records import ConnectionRecord, RecordSink, Resolver, SystemResolver
from codemode.egress.rules import EgressRules, Refusal
from codemode.errors import SandboxError
from codemode.settings.egress import NetworkSettings

__all__ = ["EgressGate", "EgressHub", "socket_base", "sweep_orphans"]

log = logging.getLogger(__name__)

SOCKET_NAME = "egress.sock"
_OPEN_TIMEOUT_S = 10.0


def socket_base() -> str:
    """Where gates' directories are made: a tmpfs if the machine offers one to this user."""
    shm = "/dev/shm"  # noqa: S108 - a tmpfs; each gate gets a private 0700 directory in it
    for base in (shm, os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()):
        if base and Path(base).is_dir() and os.access(base, os.W_OK | os.X_OK):
            return base
    return tempfile.gettempdir()


def sweep_orphans(base: str, *, min_age_s: float = 60.0) -> int:
    """Remove gate directories a dead process left in ``base`` (this user's, older than
    ``min_age_s``, with nothing listening on their socket). Returns how many went."""
    removed, now = 0, time.time()
    for entry in Path(base).glob("codemode-egress-*"):
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if now - info.st_mtime < min_age_s or _listening(entry / SOCKET_NAME):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    return removed


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True  # cannot tell: keep it
    return True


class EgressHub:
    """Serves the gates of every sandbox of one backend, on one daemon thread."""

    def __init__(
        self,
        settings: NetworkSettings,
        *,
        resolver: Resolver | None = None,
        sink: RecordSink | None = None,
        base: str | None = None,
    ) -> None:
        self.settings = settings
        self.policy = Policy(
            EgressRules(settings), resolver or SystemResolver(), settings.connect_timeout_s
        )
        # Called with every connection's record, on the hub's thread (set it at any time).
        self.sink: RecordSink | None = sink
        self.base = base or socket_base()
        sweep_orphans(self.base)  # left by a process that was killed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._gates = 0
        self._open: set[EgressGate] = set()
        # Connections being served now, over every gate (reported once each has ended).
        self.open_connections = 0

    def _acquire_loop(self) -> asyncio.AbstractEventLoop:
        """The hub's loop, started for the first open gate."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="codemode-egress", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            self._gates += 1
            return self._loop

    def _release_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """One gate fewer; the thread stops with the last (a closed pool leaves none)."""
        with self._lock:
            if loop is not self._loop:
                return  # stopped already by close()
            self._gates -= 1
            if self._gates > 0:
                return
            thread, self._loop, self._thread = self._thread, None, None
        _stop_loop(loop, thread)

    def _call(self, future: Future[None], what: str) -> None:
        try:
            future.result(timeout=_OPEN_TIMEOUT_S)
        except Exception as error:  # any failure here means no proxy
            raise SandboxError(
                f"the egress proxy could not {what}: {error}",
                fix="check that the directory for its sockets is writable, or remove "
                "[sandbox.network] allow to run without network",
            ) from error

    def open_gate(self) -> EgressGate:
        """A listening socket for one sandbox, served from now until ``gate.close()``."""
        try:
            directory = tempfile.mkdtemp(prefix="codemode-egress-", dir=self.base)
        except OSError as error:
            raise SandboxError(
                f"could not make a directory for the egress socket in {self.base}: {error}",
                fix="make /dev/shm or the temporary directory writable",
            ) from error
        gate = EgressGate(self, directory, self._acquire_loop())
        with self._lock:
            self._open.add(gate)
        try:
            self._call(asyncio.run_coroutine_threadsafe(gate._start(), gate.loop), "listen")
        except BaseException:
            gate.close()
            raise
        return gate

    def report(self, record: ConnectionRecord) -> None:
        sink = self.sink
        if sink is None:
            return
        try:
            sink(record)
        except Exception:  # a failing log must not break the proxy
            log.exception("could not record an egress connection")

    def close(self) -> None:
        """Close every open gate and stop the thread (a later ``open_gate`` starts anew)."""
        with self._lock:
            gates = list(self._open)
        for gate in gates:
            gate.close()
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._gates = 0
        if loop is not None:
            _stop_loop(loop, thread)


def _refused(session: str, refusal: Refusal, arrived: float, started: float) -> ConnectionRecord:
    """The record of a connection refused before its request was read."""
    return ConnectionRecord(
        time=arrived,
        session=session,
        method="",
        host="",
        port=0,
        address=None,
        outcome="denied",
        sent=0,
        received=0,
        duration_ms=(time.monotonic() - started) * 1000,
        error_code=refusal.code,
        reason=refusal.reason,
    )


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread | None) -> None:
    loop.call_soon_threadsafe(loop.stop)
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


class EgressGate:
    """One sandbox's way out: its socket, its connections, the session they count for."""

    def __init__(self, hub: EgressHub, directory: str, loop: asyncio.AbstractEventLoop) -> None:
        self.hub = hub
        self.loop = loop
        self.directory = directory
        self.path = str(Path(directory) / SOCKET_NAME)
        self.session = ""
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def _start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        self._server = await asyncio.start_unix_server(
            self._accept, sock=listener, limit=MAX_HEAD_BYTES
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._tasks) >= self.hub.settings.max_connections:
            limit = self.hub.settings.max_connections
            busy = Refusal(
                503,
                f"this sandbox holds {limit} connections through the proxy already "
                "([sandbox.network] max_connections); close some first",
                "egress_busy",
            )
            arrived, started = time.time(), time.monotonic()
            writer.write(refusal_response(busy))
            with contextlib.suppress(OSError):
                await writer.drain()
                await linger(reader, writer)
            writer.close()
            self.hub.report(_refused(self.session, busy, arrived, started))
            return
        self._tasks.add(task)
        self.hub.open_connections += 1
        connection = Connection(self.hub.policy, self.session)
        try:
            await connection.serve(reader, writer)
        finally:
            record = connection.record()
            if record is not None:
                self.hub.report(record)
            self._tasks.discard(task)
            self.hub.open_connections -= 1

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    def close(self) -> None:
        """Stop listening, end every connection, remove the socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._stop(), self.loop)
            with contextlib.suppress(Exception):
                future.result(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)
        with self.hub._lock:
            self.hub._open.discard(self)
        self.hub._release_loop(self.loop)

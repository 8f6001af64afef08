"""The gateway side of a remote sandbox: a ``GuestProcess`` whose guest runs on another node.

``RemoteGuest`` gives the ordinary runner (``codemode.sandbox.runner.Sandbox``) a local socket
for the bridge and local pipes for stdout and stderr, exactly as a local guest does, and a link
thread moves their bytes over the worker's stream (``codemode.cluster.stream``). So framing,
size caps, late-frame checks and tool calls run here, next to the credentials. What a local
runner learns from /proc (usage, idle, the workspace listing) is asked over the same stream
(``RemoteMeter``, ``StreamFacts``); the worker answers from its own /proc.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codemode.cluster.agent import TOKEN_BYTES
from codemode.cluster.stream import (
    BRIDGE,
    CONTROL,
    EXITED,
    MAX_CHUNK,
    STDERR,
    STDOUT,
    MuxReader,
    MuxWriter,
    decode_control,
    encode_control,
    tune,
)
from codemode.egress.proxy import EgressGate
from codemode.errors import SandboxError
from codemode.sandbox.facts import Parked, WorkspaceScan, unread_bytes
from codemode.sandbox.meter import SandboxMeter, Usage
from codemode.sandbox.workspace import Snapshot
from codemode.settings.sandbox import Limits

__all__ = ["RemoteGuest", "RemoteMeter", "StreamFacts", "StreamLink"]

log = logging.getLogger(__name__)

_F_SETPIPE_SZ = 1031
_PIPE_BYTES = 1 << 20
_NO_USAGE = Usage(0.0, 0, None, False, False, 0)


class StreamLink:
    """The gateway's end of one guest's stream: the runner's local socket and pipes on one
    side, the worker's TCP stream on the other, and the questions asked over it."""

    def __init__(
        self,
        host: str,
        port: int,
        token: bytes,
        *,
        connect_timeout_s: float = 10.0,
        dead_peer_s: int = 4,
        ask_timeout_s: float = 2.0,
    ) -> None:
        self.ask_timeout_s = ask_timeout_s
        self._asked = itertools.count(1)
        self._answers: dict[int, list[Any]] = {}
        self._answered = threading.Condition()
        # The stream ended without the worker saying the guest exited: the node (or the
        # network to it) was lost, not just the guest.
        self.lost = False
        self.exited = False
        self._closed = threading.Event()
        self._ended = threading.Event()
        self._fds_lock = threading.Lock()
        self.pending = 0  # bridge bytes read from the runner and not yet on the stream
        try:
            self.stream = socket.create_connection((host, port), timeout=connect_timeout_s)
            self.stream.sendall(token[:TOKEN_BYTES])
            self.stream.settimeout(None)
        except OSError as error:
            raise SandboxError(
                f"could not reach the sandbox's worker node at {host}:{port}: {error}",
                fix="check that gateways can open TCP connections to the worker nodes",
            ) from error
        tune(self.stream, dead_peer_s=dead_peer_s)
        self.sock, self._local = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for end in (self.sock, self._local):
            for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                with contextlib.suppress(OSError):
                    end.setsockopt(socket.SOL_SOCKET, option, _PIPE_BYTES * 4)
        self.stdout_fd, self._stdout_w = os.pipe()
        self.stderr_fd, self._stderr_w = os.pipe()
        for fd in (self.stdout_fd, self.stderr_fd):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
        self._writer = MuxWriter(self.stream)
        self._threads = [
            threading.Thread(target=self._inbound, name="codemode-link-in", daemon=True),
            threading.Thread(target=self._outbound, name="codemode-link-out", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait_ended(self, timeout_s: float) -> bool:
        return self._ended.wait(timeout_s)

    def _inbound(self) -> None:
        reader = MuxReader(self.stream)
        sinks = {STDOUT: self._stdout_w, STDERR: self._stderr_w}  # closed only by this thread
        while True:
            chunk = reader.read()
            if chunk is None:
                self.lost = not self._closed.is_set()
                break
            channel, data = chunk
            if channel == EXITED:
                self.exited = True
                break
            if channel == CONTROL:
                self._take_answer(data)
                continue
            try:
                if channel == BRIDGE:
                    self._local.sendall(data)
                else:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(sinks[channel], view) :]
            except OSError:
                break
        self._ended.set()
        # The runner sees what it would see for a local guest that died: EOF everywhere.
        self._close_writers()
        with contextlib.suppress(OSError):
            self._local.shutdown(socket.SHUT_RDWR)
        with self._answered:
            self._answered.notify_all()

    def _outbound(self) -> None:
        while True:
            try:
                data = self._local.recv(MAX_CHUNK)
            except OSError:
                data = b""
            self.pending = len(data)
            if not data or not self._writer.send(BRIDGE, data):
                break
            self.pending = 0
        with contextlib.suppress(OSError):
            self.stream.shutdown(socket.SHUT_WR)

    def _take_answer(self, data: bytes) -> None:
        answer = decode_control(data)
        if answer is None or not isinstance(answer.get("id"), int):
            return
        with self._answered:
            waiting = self._answers.get(answer["id"])
            if waiting is not None:
                waiting.append(answer.get("value"))
                self._answered.notify_all()

    def ask(self, question: str, *, wait: bool = True) -> Any:
        """Ask the worker about the guest; None when the stream is gone or no answer came
        within ``ask_timeout_s``. Any thread."""
        if self._ended.is_set() or self._closed.is_set():
            return None
        ident = next(self._asked)
        with self._answered:
            self._answers[ident] = []
        try:
            if not self._writer.send(CONTROL, encode_control({"id": ident, "ask": question})):
                return None
            if not wait:
                return None
            with self._answered:
                self._answered.wait_for(
                    lambda: bool(self._answers[ident]) or self._ended.is_set(),
                    self.ask_timeout_s,
                )
                got = self._answers[ident]
                return got[0] if got else None
        finally:
            with self._answered:
                self._answers.pop(ident, None)

    def close(self) -> None:
        """Close the stream (the worker then kills the guest). Idempotent; never hangs."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self.stream.shutdown(socket.SHUT_RDWR)
        for end in (self.sock, self._local):
            with contextlib.suppress(OSError):
                end.close()
        # The read ends first: a link thread blocked writing to a full pipe then fails.
        for fd in (self.stdout_fd, self.stderr_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stdout_fd = self.stderr_fd = -1
        for thread in self._threads:
            thread.join(timeout=2)
        self.stream.close()
        if not self._threads[0].is_alive():
            self._close_writers()  # else the inbound thread closes them as it ends

    def _close_writers(self) -> None:
        """Close the write ends of the output pipes, once, and never under the inbound thread
        that writes to them (a descriptor number closed twice, or closed under a thread that
        still uses it, may by then belong to someone else)."""
        with self._fds_lock:
            writers, self._stdout_w, self._stderr_w = (self._stdout_w, self._stderr_w), -1, -1
        for fd in writers:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


class RemoteMeter(SandboxMeter):
    """The guest's meter on its worker, asked over the stream. With no answer (the stream is
    gone) it reports the last usage it saw: the stream's end is what ends the execution."""

    def __init__(self, limits: Limits, link: StreamLink, *, kernel_enforced: bool) -> None:
        super().__init__(limits, mounts=())
        self.link = link
        self.kernel_enforced = kernel_enforced
        self._last = _NO_USAGE
        self._resumed_cpu: float | None = None

    def bind(self, guest_pid: int) -> None:
        return None  # bound on the worker by ``RemoteGuest.attach``

    def usage(self) -> Usage:
        value = self.link.ask("usage")
        if isinstance(value, dict):
            try:
                self._last = _usage(value)
            except (KeyError, TypeError, ValueError) as error:  # limits would go unwatched
                log.warning("a worker's usage answer did not parse (%r): %s", value, error)
        return self._last

    def cpu_seconds(self) -> float:
        resumed, self._resumed_cpu = self._resumed_cpu, None
        # The first reading after a resume is the one taken by it (the runner's baseline for
        # the execution: the exec frame has not been sent yet, so nothing of it ran).
        value = resumed if resumed is not None else self.link.ask("cpu")
        if isinstance(value, float | int) and not isinstance(value, bool):
            self._last = dataclasses.replace(self._last, cpu_seconds=float(value))
        return self._last.cpu_seconds

    def stop(self, *, bridge_fd: int | None = None) -> bool:
        # Stopped over there: a guest that rests is left resting by the worker's own park.
        return self.link.ask("stop") is True

    def resume(self) -> None:
        value = self.link.ask("resume")  # answered with the CPU used so far
        if isinstance(value, float | int) and not isinstance(value, bool):
            self._resumed_cpu = float(value)

    def kill(self) -> None:
        self.link.ask("kill", wait=False)


def _usage(value: dict[str, Any]) -> Usage:
    memory = value.get("memory_bytes")
    tasks = value.get("tasks")  # None where the worker's kernel caps the tasks itself
    return Usage(
        cpu_seconds=float(value["cpu_seconds"]),
        tasks=None if tasks is None else int(tasks),
        memory_bytes=None if memory is None else int(memory),
        processes_hit=value["processes_hit"] is True,
        memory_hit=value["memory_hit"] is True,
        workspace_inodes=int(value["workspace_inodes"]),
    )


class StreamFacts:
    """``GuestFacts`` asked of the worker that holds the guest."""

    def __init__(self, link: StreamLink) -> None:
        self.link = link

    def park(self) -> Parked:
        value = self.link.ask("park")
        if not isinstance(value, dict):
            return Parked(False, False, None)  # no answer: the runner restarts the sandbox
        return Parked(
            value.get("idle") is True, value.get("stopped") is True, _scan(value.get("files"))
        )

    def unread_bytes(self) -> int:
        there = self.link.ask("unread")
        if not isinstance(there, int) or isinstance(there, bool):
            return 1
        return unread_bytes(self.link.sock) + self.link.pending + there

    def interrupt(self) -> None:
        self.link.ask("interrupt")

    def list_workspace(self) -> WorkspaceScan | None:
        return _scan(self.link.ask("scan"))


def _scan(value: Any) -> WorkspaceScan | None:
    """A workspace listing as the worker sent it, checked."""
    if not isinstance(value, dict) or not isinstance(value.get("files"), dict):
        return None
    snapshot: Snapshot = {}
    for path, stamp in value["files"].items():
        if isinstance(path, str) and isinstance(stamp, list) and len(stamp) == 2:
            snapshot[path] = (int(stamp[0]), int(stamp[1]))
    used = value.get("used")
    return WorkspaceScan(
        snapshot, value.get("capped") is True, used if isinstance(used, int) else None
    )


class RemoteGuest:
    """A ``GuestProcess`` on a worker node, reached through a ``StreamLink``."""

    workspace: Path | None = None
    egress: EgressGate | None = None  # no egress proxy on worker nodes yet: no network

    def __init__(
        self, endpoint: dict[str, Any], limits: Limits, link: StreamLink, node: str | None
    ) -> None:
        self.link = link
        self.node = node
        self.token = str(endpoint.get("token", ""))  # the lease's, to carry files from it
        self.isolated = endpoint.get("isolated") is True
        self.meter: SandboxMeter = RemoteMeter(
            limits, link, kernel_enforced=endpoint.get("kernel_enforced") is True
        )
        self._facts = StreamFacts(link)
        self.sock = link.sock
        self.stdout_fd = link.stdout_fd
        self.stderr_fd = link.stderr_fd
        # Called once when the sandbox is killed (the provider forgets it).
        self.on_close: Callable[[], None] | None = None

    @property
    def guest_pid(self) -> int | None:
        return None  # the guest runs on another machine

    @property
    def facts(self) -> StreamFacts:
        return self._facts

    @property
    def lost(self) -> bool:
        """True when the node holding the guest (or the way to it) was lost."""
        return self.link.lost

    def alive(self) -> bool:
        return not self.link.ended

    def attach(self) -> None:
        answer = self.link.ask("attach")
        if answer is not True:
            raise SandboxError(
                f"the worker could not take charge of the sandbox: {answer or 'no answer'}",
                fix="check the worker node's logs",
            )

    def wait_exit(self, timeout_s: float) -> None:
        self.link.wait_ended(timeout_s)

    def kill(self) -> None:
        """Close the stream: the worker kills the guest when its stream ends."""
        self.link.close()
        self.stdout_fd = self.stderr_fd = -1
        callback, self.on_close = self.on_close, None
        if callback is not None:
            callback()

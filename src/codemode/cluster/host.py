"""The worker side of one remote sandbox: a guest started exactly as locally, and its relay.

``WorkerGuest`` starts a guest with the ordinary backend (bubblewrap, seccomp, rlimits,
cgroups) and, once a gateway has connected with the guest's token, relays the guest's bridge
socket and output pipes over that one stream (``codemode.cluster.stream``). It never decodes a
frame and never answers a tool call: the gateway does, so credentials and upstream
configuration never reach the worker. The questions a local runner answers from /proc (CPU,
usage, idle, the workspace listing) are answered here, from this node's /proc, by the same
code a local runner uses (``SandboxMeter``, ``ProcFacts``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

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
from codemode.errors import CodemodeError, SandboxError
from codemode.sandbox.facts import WorkspaceScan, unread_bytes
from codemode.sandbox.pipes import read_pipe
from codemode.sandbox.process import SandboxBackend, SandboxProcess
from codemode.sandbox.workspace import CopyReport, copy_workspace

__all__ = ["WorkerGuest"]

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 30.0
_KILLED_DRAIN_S = 2.0


class WorkerGuest:
    """One guest on this node. Started ahead of demand (a warm pool) or on a lease; relayed
    to the one gateway connection that presents its token; killed when that stream ends."""

    def __init__(self, backend: SandboxBackend, *, dead_peer_s: int = 4) -> None:
        self.dead_peer_s = dead_peer_s
        self.on_end: Callable[[WorkerGuest], None] | None = None
        self._process: SandboxProcess | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._killed = False
        self._released = False
        self._connected = False
        # Bridge bytes from the gateway: received, and written to the guest's socket.
        self._received = 0
        self._written = 0
        self._to_guest: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._queue_lock = threading.Lock()
        self._queued = 0  # chunks waiting for the writer thread
        # bwrap dies with the *thread* that forked it, so a long-lived thread starts the guest
        # and then waits until it is killed.
        self._keeper = threading.Thread(
            target=self._keep, args=(backend,), name="codemode-guest", daemon=True
        )
        self._keeper.start()
        if not self._started.wait(_START_TIMEOUT_S):
            self.kill()
            raise SandboxError(f"the sandbox did not start within {_START_TIMEOUT_S:g} s")
        error = self._start_error()
        if error is not None:
            self.kill()
            if isinstance(error, CodemodeError):
                raise error
            raise SandboxError(f"the sandbox could not start: {error}")

    def _start_error(self) -> BaseException | None:
        return self._error  # set by the keeper thread

    def _keep(self, backend: SandboxBackend) -> None:
        try:
            self._process = backend.spawn()
        except BaseException as error:  # noqa: BLE001 - handed to the constructor
            self._error = error
        self._started.set()
        self._stop.wait()

    @property
    def process(self) -> SandboxProcess:
        assert self._process is not None
        return self._process

    def wait_running(self, timeout_s: float) -> bool:
        """Wait until the guest has said it is ready (its first frame waits, unread, on the
        bridge): from then on its mounts are the sandbox's own. Only before a gateway
        connects (the relay reads the bridge after that)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.sock, selectors.EVENT_READ)
            return bool(selector.select(timeout_s))

    def carry_from(self, source: WorkerGuest) -> CopyReport:
        """Copy ``source``'s workspace into this new guest's (``fresh=true``: a new
        interpreter with the files of the old one). ``source`` is stopped between
        executions, so nothing changes under the copy."""
        if not self.wait_running(_START_TIMEOUT_S):
            raise SandboxError(f"the sandbox did not start within {_START_TIMEOUT_S:g} s")
        self.process.attach()
        src = source.process.open_workspace()
        try:
            dst = self.process.open_workspace()
            try:
                return copy_workspace(src, dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)

    @property
    def connected(self) -> bool:
        return self._connected

    def alive(self) -> bool:
        return not self._killed and self._process is not None and self._process.alive()

    def kill(self) -> None:
        """Kill the guest and end its relay. Idempotent; any thread.

        While a relay runs, its thread owns the guest's descriptors: a kill from elsewhere
        only ends the guest's processes, and the relay thread, seeing the ends of its pipes,
        releases everything. (A descriptor closed under a thread that still reads it may be
        reused by the time it reads: another guest's pipe, or a file being handed to bwrap.)
        """
        with self._lock:
            if self._killed:
                return
            self._killed = True
            relaying = self._connected
        self._to_guest.put(None)
        if relaying:
            self._terminate()
        else:
            self._release()

    def _terminate(self) -> None:
        """End every process of the guest; its descriptors stay open."""
        process = self._process
        if process is None:
            return
        if process.guest_pid is not None:
            process.meter.kill()  # pid 1 of its namespace: the kernel ends the rest
        with contextlib.suppress(OSError):
            process.popen.kill()  # bwrap; its child dies with it

    def _release(self) -> None:
        """Kill what is left and free everything (once): descriptors, cgroups, the slot."""
        with self._lock:
            if self._released:
                return
            self._released = True
        if self._process is not None:
            self._process.kill()
        self._stop.set()
        if self.on_end is not None:
            self.on_end(self)

    # --- the relay -------------------------------------------------------------------------

    def serve(self, conn: socket.socket) -> None:
        """Relay to ``conn`` (a gateway that presented the token) until either side ends.
        Runs on the calling thread; the guest is killed when it returns."""
        with self._lock:
            if self._connected or self._killed:
                conn.close()
                return
            self._connected = True
        tune(conn, dead_peer_s=self.dead_peer_s)
        writer = MuxWriter(conn)
        threads = [
            threading.Thread(
                target=self._from_gateway, args=(conn, writer), name="codemode-relay-in"
            ),
            threading.Thread(target=self._write_guest, name="codemode-relay-guest"),
        ]
        for thread in threads:
            thread.daemon = True
            thread.start()
        try:
            self._to_gateway(writer)
        finally:
            self.kill()
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # what was sent (EXITED) still goes out
            for thread in threads:
                thread.join(timeout=5)
            conn.close()
            self._release()

    def _to_gateway(self, writer: MuxWriter) -> None:
        process = self.process
        sock = process.sock
        outputs = {process.stdout_fd: STDOUT, process.stderr_fd: STDERR}
        for fd in outputs:
            os.set_blocking(fd, False)
        with selectors.DefaultSelector() as selector:
            selector.register(sock, selectors.EVENT_READ)
            for fd in outputs:
                selector.register(fd, selectors.EVENT_READ)
            killed_at: float | None = None
            while True:
                try:
                    ready = {key.fd for key, _ in selector.select(0.5)}
                except (OSError, ValueError):
                    ready = {sock.fileno()}
                if not ready:
                    # A killed guest's pipes end at once; a bound all the same.
                    if self._killed:
                        killed_at = killed_at or time.monotonic()
                        if time.monotonic() - killed_at > _KILLED_DRAIN_S:
                            break
                    continue
                # Output first: what the guest printed before a frame goes out before it.
                for fd, channel in outputs.items():
                    self._drain(fd, channel, writer, selector, fd in ready)
                if sock.fileno() not in ready:
                    continue
                try:
                    data = sock.recv(MAX_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    for fd, channel in outputs.items():
                        self._drain(fd, channel, writer, selector, False)
                    break
                if not writer.send(BRIDGE, data):
                    return  # the gateway is gone
        writer.send(EXITED)

    @staticmethod
    def _drain(
        fd: int,
        channel: bytes,
        writer: MuxWriter,
        selector: selectors.BaseSelector,
        ready: bool,
    ) -> None:
        """Pass on what the pipe holds (``ready``: the selector said it is readable)."""
        if fd < 0:
            return
        data = read_pipe(fd, bytearray(4), ready=ready)
        if data is None:
            return
        if not data:
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(fd)
            return
        writer.send(channel, data)

    def _from_gateway(self, conn: socket.socket, writer: MuxWriter) -> None:
        reader = MuxReader(conn)
        while True:
            chunk = reader.read()
            if chunk is None:
                break
            channel, data = chunk
            if channel == BRIDGE:
                self._received += len(data)
                self._forward(data)
            elif channel == CONTROL:
                answer = self._answer(data)
                if answer is not None:
                    writer.send(CONTROL, encode_control(answer))
            else:
                break
        # The gateway hung up (it ended this sandbox, or it died): nothing may keep running.
        self.kill()

    def _forward(self, data: bytes) -> None:
        """Bridge bytes to the guest: at once when its socket takes them (the common case, one
        thread hop less), else queued for the writer thread, so a guest slow to read never
        holds up the gateway's questions. Queued bytes keep their order."""
        with self._queue_lock:
            if not self._queued:
                try:
                    sent = self.process.sock.send(data, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    return  # the guest is gone; its exit ends the relay
                self._written += sent
                data = data[sent:]
            if data:
                self._queued += 1
                self._to_guest.put(data)

    def _write_guest(self) -> None:
        sock = self.process.sock
        while (data := self._to_guest.get()) is not None:
            try:
                sock.sendall(data)
            except OSError:
                return
            with self._queue_lock:
                self._written += len(data)
                self._queued -= 1

    # --- the gateway's questions -----------------------------------------------------------

    def _answer(self, question: bytes) -> dict[str, Any] | None:
        asked = decode_control(question)
        if asked is None or not isinstance(asked.get("id"), int):
            return None
        try:
            value = self.ask(str(asked.get("ask")))
        except Exception as error:  # noqa: BLE001 - answered "unknown"; the relay goes on
            log.warning("could not answer %r about a sandbox: %s", asked.get("ask"), error)
            value = None
        return {"id": asked["id"], "value": value}

    def ask(self, question: str) -> Any:
        """The answer to one of the runner's questions about this guest (None once it was
        killed: its pid may name another process by now)."""
        if self._killed:
            return None
        process = self.process
        meter = process.meter
        if question == "attach":
            try:
                process.attach()
            except SandboxError as error:
                return str(error)
            return True
        if question == "usage":
            return asdict(meter.usage())
        if question == "cpu":
            return meter.cpu_seconds()
        if question == "stop":
            return meter.stop()
        if question == "resume":
            meter.resume()
            return meter.cpu_seconds()
        if question == "kill":
            meter.kill()
            return True
        if question == "park":
            parked = process.facts.park()
            return {
                "idle": parked.idle,
                "stopped": parked.stopped,
                "files": _scan(parked.files),
            }
        if question == "unread":
            # Received from the gateway, and not yet read by the guest.
            pending = self._received - self._written
            return pending + (unread_bytes(process.sock) if pending >= 0 else 1)
        if question == "interrupt":
            process.facts.interrupt()
            return True
        if question == "scan":
            return _scan(process.facts.list_workspace())
        return None


def _scan(found: WorkspaceScan | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"files": found.snapshot, "capped": found.capped, "used": found.used_bytes}

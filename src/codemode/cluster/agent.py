"""One agent per worker node: a warm pool of guests, one listening port, leases by token.

The agent (a Ray actor pinned to its node, see ``codemode.cluster.actor``; in tests also a
plain object) keeps ``warm`` guests started ahead of demand, so a new session costs a lease and
a TCP connection instead of a Ray worker process and a sandbox start. It holds at most
``slots`` leased guests, whichever gateway leased them, so capacity holds across replicas. A
lease is a 32-byte token; the gateway presents it on the agent's port and gets that guest's
stream. A lease nobody connects to in time is ended, and so is a guest whose stream ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import socket
import threading
from collections import deque
from typing import Any

from codemode.cluster.host import WorkerGuest
from codemode.errors import CodemodeError, SandboxError
from codemode.sandbox.backends import make_backend
from codemode.sandbox.process import SandboxBackend
from codemode.settings.sandbox import SandboxSettings

__all__ = ["TOKEN_BYTES", "NodeAgent", "settings_digest"]

log = logging.getLogger(__name__)

TOKEN_BYTES = 32
_HANDSHAKE_S = 5.0
_SKIPPED_LISTED = 20


def settings_digest(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


class NodeAgent:
    """Sandboxes on this node for any gateway: ``lease`` one, connect with its token."""

    def __init__(
        self,
        settings: dict[str, Any],
        *,
        slots: int,
        warm: int = 2,
        bind_host: str = "127.0.0.1",
        accept_timeout_s: float = 30.0,
        dead_peer_s: int = 4,
    ) -> None:
        self.slots = slots
        self.warm_target = min(warm, slots)
        self.accept_timeout_s = accept_timeout_s
        self.dead_peer_s = dead_peer_s
        self._warm_digest = settings_digest(settings)
        self._backends: dict[str, SandboxBackend] = {
            self._warm_digest: make_backend(SandboxSettings.model_validate(settings))
        }
        self._cond = threading.Condition()
        self._warm: deque[WorkerGuest] = deque()
        self._starting = 0
        # Leased guests by the digest of their token (the token itself is never a dict key).
        # (None while a cold guest starts.)
        self._leased: dict[bytes, tuple[bytes, WorkerGuest | None]] = {}
        self._closed = False
        self.listener = socket.create_server((bind_host, 0))
        self.host = bind_host
        self.port: int = self.listener.getsockname()[1]
        self._threads = [
            threading.Thread(target=self._accept, name="codemode-agent-accept", daemon=True),
            threading.Thread(target=self._refill, name="codemode-agent-warm", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # --- what the gateway calls ------------------------------------------------------------

    def load(self) -> dict[str, int]:
        with self._cond:
            return {"slots": self.slots, "leased": len(self._leased), "warm": len(self._warm)}

    def lease(
        self, settings: dict[str, Any], carry_from: str | None = None
    ) -> dict[str, Any] | None:
        """A guest for one session (warm when one is ready): where to connect and its token.
        None when every slot of the node is leased. ``carry_from``: the token of a guest
        leased here whose workspace the new guest starts with (``fresh=true``)."""
        digest = settings_digest(settings)
        guest: WorkerGuest | None = None
        with self._cond:
            if self._closed or len(self._leased) >= self.slots:
                return None
            if digest == self._warm_digest:
                while self._warm and guest is None:
                    candidate = self._warm.popleft()
                    if candidate.alive():
                        guest = candidate
                    else:
                        candidate.kill()
            token = secrets.token_bytes(TOKEN_BYTES)
            key = hashlib.sha256(token).digest()
            self._leased[key] = (token, guest)
            self._cond.notify_all()
        try:
            if guest is None:
                guest = WorkerGuest(self._backend(digest, settings), dead_peer_s=self.dead_peer_s)
        except BaseException:
            with self._cond:
                self._leased.pop(key, None)
            raise
        with self._cond:
            self._leased[key] = (token, guest)
        guest.on_end = lambda ended: self._ended(key)
        carried: dict[str, Any] | None = None
        if carry_from is not None:
            try:
                report = guest.carry_from(self._guest_of(carry_from))
            except (OSError, CodemodeError) as error:
                guest.kill()
                raise SandboxError(
                    f"could not carry the workspace into a fresh interpreter: {error}",
                    fix="run again without fresh=true, or start a new session",
                ) from error
            carried = {"files": report.files, "skipped": report.skipped[:_SKIPPED_LISTED]}
        timer = threading.Timer(self.accept_timeout_s, self._expire, args=(key, guest))
        timer.daemon = True
        timer.start()
        return {
            "host": self.host,
            "port": self.port,
            "token": token.hex(),
            "isolated": guest.process.isolated,
            "kernel_enforced": guest.process.meter.kernel_enforced,
            "carried": carried,
        }

    def _guest_of(self, token_hex: str) -> WorkerGuest:
        try:
            token = bytes.fromhex(token_hex)
        except ValueError:
            token = b""
        with self._cond:
            entry = self._leased.get(hashlib.sha256(token).digest())
        if entry is None or entry[1] is None or not hmac.compare_digest(entry[0], token):
            raise SandboxError(
                "the sandbox to carry files from is not on this node any more",
                fix="start a new session",
            )
        return entry[1]

    def close(self) -> None:
        """Kill every guest of this agent and stop listening."""
        with self._cond:
            self._closed = True
            doomed = [*self._warm, *(guest for _, guest in self._leased.values() if guest)]
            self._warm.clear()
            self._cond.notify_all()
        for guest in doomed:
            guest.kill()
        with contextlib.suppress(OSError):
            self.listener.close()

    # --- inside the agent ------------------------------------------------------------------

    def _backend(self, digest: str, settings: dict[str, Any]) -> SandboxBackend:
        with self._cond:
            backend = self._backends.get(digest)
        if backend is None:
            backend = make_backend(SandboxSettings.model_validate(settings))
            with self._cond:
                self._backends.setdefault(digest, backend)
        return backend

    def _ended(self, key: bytes) -> None:
        with self._cond:
            self._leased.pop(key, None)
            self._cond.notify_all()

    def _expire(self, key: bytes, guest: WorkerGuest) -> None:
        """Nobody came for this lease in time: do not leave a guest behind."""
        with self._cond:
            entry = self._leased.get(key)
        if entry is not None and entry[1] is guest and not guest.connected:
            guest.kill()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._handshake, args=(conn,), name="codemode-agent-conn", daemon=True
            ).start()

    def _handshake(self, conn: socket.socket) -> None:
        """Read the token; the guest it names gets this connection (this thread relays)."""
        conn.settimeout(_HANDSHAKE_S)
        presented = b""
        with contextlib.suppress(OSError):
            while len(presented) < TOKEN_BYTES:
                data = conn.recv(TOKEN_BYTES - len(presented))
                if not data:
                    break
                presented += data
        with self._cond:
            entry = self._leased.get(hashlib.sha256(presented).digest())
        if entry is None or entry[1] is None or not hmac.compare_digest(entry[0], presented):
            conn.close()  # not a gateway that leased a guest here
            return
        conn.settimeout(None)
        entry[1].serve(conn)

    @property
    def closed(self) -> bool:
        return self._closed

    def _short(self) -> bool:
        started = len(self._warm) + self._starting
        return started < self.warm_target and len(self._leased) + started < self.slots

    def _refill(self) -> None:
        """Keep ``warm_target`` guests started, within the node's free slots."""
        failures = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._short())
                if self._closed:
                    return
                self._starting += 1
            try:
                guest = WorkerGuest(self._backends[self._warm_digest], dead_peer_s=self.dead_peer_s)
                failures = 0
            except CodemodeError as error:
                failures += 1
                log.warning("the node agent could not start a warm sandbox: %s", error)
                with self._cond:
                    self._starting -= 1
                    # Back off instead of spinning when sandboxes cannot start at all.
                    self._cond.wait(timeout=min(0.1 * 2**failures, 5.0))
                continue
            with self._cond:
                self._starting -= 1
                closed = self.closed
                if not closed:
                    self._warm.append(guest)
                    self._cond.notify_all()
            if closed:
                guest.kill()
                return

"""How the runner reads the bridge: a start that ends at once, seen without a real guest."""

from __future__ import annotations

import os
import socket

import pytest

from codemode.errors import SandboxError
from codemode.sandbox.guest import wire
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import Limits


class _Meter:
    kernel_enforced = False


class _ExitedGuest:
    """A guest process that said "ready" and exited: its frame and its end wait together."""

    guest_pid = None
    workspace = None
    meter = _Meter()

    def __init__(self) -> None:
        self.sock, guest_end = socket.socketpair()
        guest_end.sendall(wire.encode_frame({"op": "ready", "pid": 1}))
        guest_end.close()
        self.stdout_fd, stdout_w = os.pipe()
        self.stderr_fd, stderr_w = os.pipe()
        os.write(stderr_w, b"gone at once")
        os.close(stdout_w)
        os.close(stderr_w)

    def wait_exit(self, timeout_s: float) -> None:
        return None

    def alive(self) -> bool:
        return False

    def kill(self) -> None:
        self.sock.close()
        for fd in (self.stdout_fd, self.stderr_fd):
            os.close(fd)


def test_a_guest_that_exits_right_after_ready_is_a_failed_start() -> None:
    # Its "ready" comes with the end of the stream in one read: the start failed (a caller
    # retries it), not an execution that later finds its sandbox gone.
    sandbox = Sandbox(_ExitedGuest(), Limits())  # type: ignore[arg-type]
    with pytest.raises(SandboxError, match="exited while starting: gone at once"):
        sandbox.wait_ready(5)

"""How the runner reads the bridge: a start that ends at once (without a real guest), and the
output a call finds already read."""

from __future__ import annotations

import os
import socket

import pytest

from codemode.bridge.host import ToolAccess
from codemode.errors import SandboxError
from codemode.sandbox import SandboxSession
from codemode.sandbox.guest import wire
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import Limits
from codemode.tools import ToolCall


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


class _Watching:
    """A tool that notes what the session shows as printed while the call is being answered."""

    def __init__(self) -> None:
        self.session: SandboxSession | None = None
        self.seen: list[str] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> object:
        assert self.session is not None
        self.seen.append(self.session.live_stdout())
        return None


@pytest.mark.parametrize("how", ["print", "os.write"])
def test_a_call_finds_what_was_printed_before_it_read(session: SandboxSession, how: str) -> None:
    # What an approval shows: output written before the call, by print or straight to fd 1.
    tools = _Watching()
    tools.session = session
    write = (
        "print('about to delete 3 files')"
        if how == "print"
        else ("import os; os.write(1, b'about to delete 3 files\\n')")
    )
    code = f"from servers._runtime import call_tool\n{write}\ncall_tool('fs', 'delete', {{}})\n"
    result = session.execute(code, tools=ToolAccess(tools))
    assert result.status == "ok", result.to_dict()
    assert tools.seen == ["about to delete 3 files\n"]

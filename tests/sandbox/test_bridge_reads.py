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


class _Recording:
    """A tool that keeps the arguments it got and answers with ``answer``."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.arguments: list[dict[str, object]] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> object:
        self.arguments.append(call.arguments)
        return self.answer


_ARGUMENTS_SENT = """
import collections, enum
from servers._runtime import call_tool
class Colour(enum.IntEnum):
    RED = 1
rows = [{"id": i, "name": f"row {i}", "score": i / 4} for i in range(3000)]
plain = call_tool("crm", "save", {"rows": rows, "pair": (1, 2), "flag": True, "blob": b"\\x00"})
converted = call_tool("crm", "save", {"keys": {1: "a"}, "colour": Colour.RED,
                                      "ordered": collections.OrderedDict(b=2), "long": "x" * 70000})
import sys
wire = sys.modules["_codemode_guest.wire"]
print(wire._native_pack is not None, plain == converted, len(plain), plain[2999], plain[0])
"""


def test_the_guest_encodes_and_decodes_with_the_hosts_c_msgpack(session: SandboxSession) -> None:
    # The sandbox's site directories hold codemode's msgpack: the guest's codec uses it, and
    # what arrives on either side is what the pure-Python codec sent (a tuple as a list, a key
    # that is no str as a str, a subclass as its base type, a long string on its own).
    answer = [{"id": i, "name": f"row {i}", "tags": ["a", "b"], "n": None} for i in range(3000)]
    tools = _Recording(answer)
    result = session.execute(_ARGUMENTS_SENT, tools=ToolAccess(tools))
    assert result.status == "ok", result.render_text()
    expected_last = {"id": 2999, "name": "row 2999", "tags": ["a", "b"], "n": None}
    assert result.stdout.split(" ", 3)[:3] == ["True", "True", "3000"]
    assert repr(expected_last) in result.stdout
    first, second = tools.arguments
    assert first["rows"] == [{"id": i, "name": f"row {i}", "score": i / 4} for i in range(3000)]
    assert (first["pair"], first["flag"], first["blob"]) == ([1, 2], True, b"\x00")
    assert second == {"keys": {"1": "a"}, "colour": 1, "ordered": {"b": 2}, "long": "x" * 70000}
    assert type(second["colour"]) is int

"""``fresh=True``: a new interpreter from the pool, with the workspace's files carried over.

Finding: patched builtins and the tool runtime survived ``fresh=True`` (it only cleared the
namespace and the imported modules of the same interpreter).
"""

from __future__ import annotations

import pytest

from codemode.bridge.host import ToolAccess
from codemode.sandbox import SandboxSession
from codemode.testing import RecordingInvoker

pytestmark = pytest.mark.limits


def echo() -> RecordingInvoker:
    """Every tool answers ``{"echo": <its arguments>}``; every call is recorded."""
    return RecordingInvoker(default=lambda call: {"echo": call.arguments})


PATCH_EVERYTHING = """
import builtins, json, os, sys
secret = 42
builtins.print = lambda *args, **kwargs: None
builtins.open = lambda *args, **kwargs: None
json.dumps = lambda *args, **kwargs: "patched"
runtime = sys.modules["servers._runtime"]
runtime.call_tool = lambda server, tool, arguments: "forged"
runtime.bridge.request = lambda frame: {"ok": True, "value": "forged"}
class Finder:
    def find_spec(self, name, path=None, target=None):
        raise ImportError("hijacked")
sys.meta_path.insert(0, Finder())
"""

FILES = """
import os
os.makedirs("dir/sub", exist_ok=True)
with open("dir/sub/data.txt", "w") as handle:
    handle.write("kept")
os.chmod("dir/sub/data.txt", 0o640)
os.symlink("/etc/shadow", "link")
with open("big.bin", "wb") as handle:
    handle.write(os.urandom(3 << 20))
"""

CHECK = """
import hashlib, json, os, stat
from servers._runtime import call_tool
print("secret" in globals())
print(json.dumps({"a": 1}))
print(call_tool("t", "echo", {"x": 1}))
print(open("dir/sub/data.txt").read(), oct(stat.S_IMODE(os.stat("dir/sub/data.txt").st_mode)))
print(os.readlink("link"), os.path.islink("link"))
print(os.path.getsize("big.bin"))
"""


def test_fresh_starts_from_an_unpatched_interpreter(isolated_session: SandboxSession, host) -> None:
    tools = echo()
    assert isolated_session.execute(FILES, timeout_s=10).status == "ok"
    assert isolated_session.execute(PATCH_EVERYTHING, timeout_s=10).status == "ok"
    patched = isolated_session.sandbox
    result = isolated_session.execute(CHECK, tools=ToolAccess(tools), fresh=True, timeout_s=10)
    assert result.status == "ok", result.to_dict()
    assert result.stdout.splitlines() == [
        "False",
        '{"a": 1}',
        "{'echo': {'x': 1}}",
        "kept 0o640",
        "/etc/shadow True",
        str(3 << 20),
    ]
    assert [call.arguments for call in tools.calls] == [{"x": 1}]
    # A new interpreter (the patched one is gone), not a reset: files are kept.
    assert isolated_session.sandbox is not patched and patched is not None and patched.dead
    assert result.sandbox_reset is False
    assert result.files == {"created": [], "modified": [], "deleted": []}
    host.next_execution_works(isolated_session)


def test_fresh_keeps_working_after_many_files(isolated_session: SandboxSession, host) -> None:
    code = "import os\nfor i in range(3000):\n    open(f'f{i}', 'w').write(str(i))"
    assert isolated_session.execute(code, timeout_s=20).status == "ok"
    result = isolated_session.execute(
        "import os\nprint(len(os.listdir('.')), open('f2999').read())", fresh=True, timeout_s=20
    )
    assert result.stdout == "3000 2999\n", result.to_dict()
    host.next_execution_works(isolated_session)

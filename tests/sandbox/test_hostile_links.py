"""Symlinks and hard links planted in the workspace: the result lists the link names only, the
scan never follows them, and nothing on the host reads through them.
"""

from __future__ import annotations

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

LINKS = {
    "shadow": "/etc/shadow",
    "passwd": "/etc/passwd",
    "proc-root": "/proc/1/root",
    "proc-self-root": "/proc/self/root",
    "up": "../..",
    "root-dir": "/",
    "usr": "/usr",
    "loop": "loop",
    "dangling": "/nonexistent/file",
    "host-repo": "/work/main",
    "fd-bridge": "/proc/self/fd/11",
}


def test_planted_symlinks_are_listed_not_followed(isolated_session: SandboxSession, host) -> None:
    code = "import os\n" + "".join(
        f"os.symlink({target!r}, {name!r})\n" for name, target in LINKS.items()
    )
    result = isolated_session.execute(code, timeout_s=10)
    assert result.status == "ok", result.to_dict()
    # Exactly the link names: following "/", "/usr" or "../.." would list thousands of files.
    assert result.files["created"] == sorted(LINKS)
    assert result.truncated["stdout_total_bytes"] == 0
    # A second execution that modifies nothing reports nothing (the links are not re-read).
    again = isolated_session.execute("pass")
    assert again.files == {"created": [], "modified": [], "deleted": []}
    host.next_execution_works(isolated_session)


def test_links_replaced_between_executions(isolated_session: SandboxSession, host) -> None:
    isolated_session.execute("open('data.txt', 'w').write('x')")
    result = isolated_session.execute(
        "import os\nos.remove('data.txt')\nos.symlink('/etc/passwd', 'data.txt')", timeout_s=5
    )
    assert result.status == "ok"
    assert result.files["modified"] == ["data.txt"] or result.files["created"] == ["data.txt"]
    host.next_execution_works(isolated_session)


def test_hard_links_to_system_files_are_refused(isolated_session: SandboxSession, host) -> None:
    code = """
import os
made = []
for target in ("/etc/passwd", "/usr/bin/env", "/tmp/x", "/dev/null", "/proc/self/environ"):
    if target == "/tmp/x":
        open(target, "w").close()
    try:
        os.link(target, "hard-" + os.path.basename(target))
        made.append(target)
    except OSError:
        pass
print("RESULT:", "ESCAPED " + repr(made) if made else "BLOCKED")
"""
    result = isolated_session.execute(code, timeout_s=5)
    # Every target is on another mount: EXDEV. A hard link never crosses into the workspace.
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    assert result.files["created"] == []
    host.next_execution_works(isolated_session)


def test_hard_links_inside_the_workspace_are_plain_files(
    isolated_session: SandboxSession, host
) -> None:
    code = "import os\nopen('a', 'w').write('x')\nfor i in range(5):\n    os.link('a', f'h{i}')"
    result = isolated_session.execute(code, timeout_s=5)
    assert result.files["created"] == ["a", "h0", "h1", "h2", "h3", "h4"]
    host.next_execution_works(isolated_session)


def test_symlinked_directory_is_not_descended(isolated_session: SandboxSession, host) -> None:
    code = """
import os
os.makedirs("real/sub")
open("real/sub/f", "w").close()
os.symlink("/usr/lib", "real/sub/lib")
os.symlink("..", "real/sub/parent")
"""
    result = isolated_session.execute(code, timeout_s=5)
    assert result.files["created"] == ["real/sub/f", "real/sub/lib", "real/sub/parent"]
    host.next_execution_works(isolated_session)


def test_deep_directory_tree_and_odd_names(isolated_session: SandboxSession, host) -> None:
    code = r"""
import os
path = "d"
for _ in range(300):
    path += "/d"
os.makedirs(path)
open(path + "/leaf", "w").close()
for name in ("new\nline", "tab\there", " space", "-dash", "quote'\"", "emoji-\u2603"):
    open(name, "w").close()
"""
    result = isolated_session.execute(code, timeout_s=10)
    assert result.status == "ok", result.to_dict()
    # The host lists the workspace with one open directory per level, down to a bounded
    # depth: the leaf 301 levels down is past it, and the result says the list is partial.
    assert sorted(result.files["created"]) == [
        " space", "-dash", "emoji-\u2603", "new\nline", "quote'\"", "tab\there"
    ]  # fmt: skip
    assert result.truncated["files"] == -1
    host.next_execution_works(isolated_session)


def test_undecodable_file_name(isolated_session: SandboxSession, host) -> None:
    code = "import os\nfd = os.open(b'bad-\\xff\\xfe', os.O_CREAT | os.O_WRONLY)\nos.close(fd)"
    result = isolated_session.execute(code, timeout_s=5)
    # The name is not UTF-8: the result must still arrive (not a malformed frame or a timeout).
    assert result.status == "ok", result.to_dict()
    assert len(result.files["created"]) == 1
    host.next_execution_works(isolated_session)


def test_error_message_with_a_lone_surrogate(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute("raise ValueError('bad \\udcff name')", timeout_s=5)
    # The error still arrives as a clean "error" result, not a malformed frame and a timeout.
    assert (result.status, result.error and result.error["type"]) == ("error", "ValueError")
    host.next_execution_works(isolated_session)

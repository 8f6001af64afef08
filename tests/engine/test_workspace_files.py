"""A session's workspace through the engine: listed and read inside the sandbox, project mode.

Real bubblewrap sandboxes: the files are read by the sandbox (links never followed) and the
host only checks what it is sent.
"""

from __future__ import annotations

import pytest

from codemode.engine import Codemode
from codemode.errors import UnknownSessionError, WorkspaceFileError

pytestmark = pytest.mark.anyio

MAKE_FILES = """
import os
os.makedirs("charts", exist_ok=True)
with open("result.md", "w") as out:
    out.write("# Result\\n\\nAll good.\\n")
with open("charts/data.bin", "wb") as out:
    out.write(bytes(range(256)) * 4)
os.symlink("/etc/passwd", "passwd")
os.symlink("/etc", "etc")
"""


async def test_files_are_listed_with_sizes_and_types_and_read(engine: Codemode) -> None:
    made = await engine.execute(MAKE_FILES)
    assert made.status == "ok", made.render_text()
    assert made.session is not None
    listing = await engine.list_files(made.session)
    entries = {entry.path: entry for entry in listing.entries}
    assert (entries["result.md"].kind, entries["result.md"].size) == ("file", 20)
    assert entries["result.md"].mime == "text/markdown"
    assert (entries["charts/data.bin"].size, entries["charts"].kind) == (1024, "dir")
    assert entries["passwd"].kind == "link" and entries["etc"].kind == "link"
    assert not any(path.startswith("etc/") for path in entries)  # a linked folder is not walked
    report = await engine.read_file(made.session, "result.md")
    assert report.data == b"# Result\n\nAll good.\n" and not report.truncated
    part = await engine.read_file(made.session, "charts/data.bin", limit=300)
    assert part.data == (bytes(range(256)) * 2)[:300]
    assert (part.size, part.truncated) == (1024, True)


@pytest.mark.parametrize("path", ["passwd", "etc/passwd", "../etc/passwd", "/etc/passwd", "charts"])
async def test_links_folders_and_paths_outside_are_refused(engine: Codemode, path: str) -> None:
    made = await engine.execute(MAKE_FILES)
    assert made.session is not None
    with pytest.raises(WorkspaceFileError):
        await engine.read_file(made.session, path)


async def test_another_owner_cannot_list_or_read(engine: Codemode) -> None:
    made = await engine.execute(MAKE_FILES, owner="alice")
    assert made.session is not None
    with pytest.raises(UnknownSessionError):
        await engine.read_file(made.session, "result.md", owner="mallory")
    with pytest.raises(UnknownSessionError):
        await engine.list_files(made.session, owner="mallory")
    assert engine.session_handles("alice") == [made.session]
    assert engine.session_handles("mallory") == []


async def test_reading_files_leaves_the_code_s_variables_alone(engine: Codemode) -> None:
    made = await engine.execute("x = 41\nopen('a.txt', 'w').write('a')")
    assert made.session is not None
    await engine.list_files(made.session)
    await engine.read_file(made.session, "a.txt")
    again = await engine.execute(
        "print(x + 1, sorted(k for k in globals() if 'codemode' in k))", session=made.session
    )
    assert again.stdout == "42 []\n"


TESTED_CODE = """
with open("slug.py", "w") as out:
    out.write("def slug(text):\\n    return '-'.join(text.lower().split())\\n")
with open("test_slug.py", "w") as out:
    out.write("from slug import slug\\n\\ndef test_slug():\\n    assert slug(' A b ') == 'a-b'\\n")
"""

RUN_PYTEST = """
import subprocess, sys
done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                      capture_output=True, text=True)
print(done.returncode, done.stdout.strip().splitlines()[-1])
"""


async def test_project_mode_fresh_folders_tree_and_pytest(engine: Codemode) -> None:
    first = await engine.execute(TESTED_CODE, fresh_dir=True)
    assert first.status == "ok", first.render_text()
    assert first.task_dir == "tasks/001"
    assert first.files["created"] == ["tasks/001/slug.py", "tasks/001/test_slug.py"]
    tree = first.workspace_tree
    assert tree.splitlines()[:3] == ["tasks/", "  001/", "    slug.py (58 B)"]
    assert "workspace:" in first.render_text() and "task folder: tasks/001" in first.render_text()
    tested = await engine.execute(RUN_PYTEST, session=first.session)
    assert tested.status == "ok", tested.render_text()
    code, summary = tested.stdout.split(" ", 1)
    assert code == "0" and "1 passed" in summary
    second = await engine.execute(
        "import os\nprint(os.getcwd())", session=first.session, fresh_dir=True
    )
    assert second.stdout == "/workspace/tasks/002\n"
    assert "  002/" in second.workspace_tree


async def test_a_fresh_interpreter_goes_on_in_the_tasks_folder(engine: Codemode) -> None:
    first = await engine.execute(TESTED_CODE + "\nx = 1", fresh_dir=True)
    assert first.status == "ok" and first.task_dir == "tasks/001", first.render_text()
    fresh = await engine.execute(
        "import os\nfrom slug import slug\nprint(os.getcwd(), 'x' in globals(), slug(' A b '))",
        session=first.session,
        fresh=True,
    )
    assert fresh.status == "ok", fresh.render_text()
    assert fresh.stdout.split() == ["/workspace/tasks/001", "False", "a-b"]
    assert fresh.task_dir == "tasks/001"


async def test_output_beyond_the_tail_is_written_whole_to_a_file(engine: Codemode) -> None:
    lines = [f"row {i}: {'x' * 40}" for i in range(400)]
    printed = await engine.execute("for i in range(400):\n    print(f\"row {i}: {'x' * 40}\")")
    assert printed.status == "ok" and printed.truncated["stdout_bytes"] > 0
    assert printed.stdout.endswith(lines[-1] + "\n")
    path = printed.stdout_file
    assert path == "outputs/stdout-001.txt"
    assert path in printed.hint
    assert printed.session is not None
    whole = await engine.read_file(printed.session, path)
    assert whole.data.decode() == "\n".join(lines) + "\n"
    again = await engine.execute(
        "import os\nprint(open(os.path.expanduser('~/outputs/stdout-001.txt')).read()[:9])",
        session=printed.session,
    )
    assert again.stdout == "row 0: xx\n"
    assert again.stdout_file is None

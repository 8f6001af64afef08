"""Packages a session installed are there again after its sandbox was released while idle, or
killed from outside: the new sandbox installs them again (through the host's installer, its
checks and its audit) as it restores the checkpoint; and a new interpreter of the session
(``fresh=True``) imports them. Real bubblewrap sandboxes, a local index."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import msgpack
import pytest
from package_index import Index, build_wheel

from codemode.audit.events import AuditFilter
from codemode.catalog.catalog import Catalog
from codemode.checkpoints import Checkpoint, KVCheckpoints
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import PackageSettings
from codemode.skills.installs import imported_installs
from codemode.state.store import MemoryStore

pytestmark = pytest.mark.anyio

USE = "import tinylib\nprint(tinylib.VALUE)"


@pytest.fixture
async def engine(index: Index, tmp_path: Path) -> AsyncIterator[Codemode]:
    build_wheel(index.files, "tinylib", "1.0", "VALUE = 42\n")
    index.add(index.files, "tinylib")
    packages = PackageSettings(enabled=True, index_url=index.url, cache_dir=str(tmp_path / "pk"))
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(packages=packages, pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state", idle_release_s=0),
    )
    async with Codemode(config, catalog=Catalog([]), semantic=False) as started:
        yield started


def add_otherlib(index: Index) -> None:
    """A second package in the index, which the sessions below never install."""
    build_wheel(index.files, "otherlib", "1.0", "VALUE = 7\n")
    index.add(index.files, "otherlib")


async def assert_import_refused(engine: Codemode, handle: str | None) -> None:
    """An import installs only what the session (or a skill it imported) installed."""
    other = await engine.execute("import otherlib", session=handle)
    assert other.status == "error" and other.error is not None
    assert other.error["type"] == "ModuleNotFoundError", other.render_text()


async def release(engine: Codemode, handle: str | None) -> None:
    assert engine.registry is not None and handle is not None
    record = engine.registry.get(handle, None)
    assert await anyio.to_thread.run_sync(lambda: record.sandbox.release(lambda: True))


async def test_an_installed_package_imports_after_an_idle_release(engine: Codemode) -> None:
    done = await engine.execute(f"%pip install tinylib\n{USE}")
    assert done.status == "ok" and done.stdout.strip().endswith("42"), done.render_text()
    await release(engine, done.session)

    again = await engine.execute(USE, session=done.session)
    assert again.status == "ok", again.render_text()
    assert again.stdout.strip() == "42", "the install's own output is not the code's"
    assert again.restored is not None and again.restored.packages == ["tinylib"]
    assert again.restored.to_dict()["packages"] == ["tinylib"]
    assert "Packages it had installed were installed again: tinylib." in again.hint
    # Installed again through the host's installer: its checks ran, and the audit shows it.
    assert engine.audit_log is not None
    installs = engine.audit_log.query(AuditFilter(tool="_packages.*"))
    assert [(event.outcome, event.message) for event in installs] == [
        ("ok", "installed tinylib==1.0"),
        ("ok", "installed tinylib==1.0 (cached)"),  # answered from the store: no uv run
    ]
    # The next restore still knows them (the checkpoint taken after it keeps them).
    await engine.execute("open('note.txt', 'w').write('x')", session=done.session)
    await release(engine, done.session)
    third = await engine.execute(USE, session=done.session)
    assert third.stdout.strip() == "42", third.render_text()
    assert third.restored is not None and third.restored.files == ["note.txt"]


async def test_an_install_after_the_last_checkpoint_is_kept_too(engine: Codemode) -> None:
    first = await engine.execute("open('data.txt', 'w').write('1')")  # a checkpoint is taken
    assert first.checkpoint is None and first.status == "ok", first.render_text()
    installed = await engine.execute("packages.install(['tinylib'])", session=first.session)
    assert installed.status == "ok", installed.render_text()
    await release(engine, first.session)
    again = await engine.execute(USE, session=first.session)
    assert again.stdout.strip() == "42", again.render_text()
    assert again.restored is not None and again.restored.files == ["data.txt"]


async def test_a_sandbox_killed_from_outside_comes_back_with_its_packages(
    engine: Codemode,
) -> None:
    done = await engine.execute("packages.install(['tinylib'])")
    assert done.status == "ok", done.render_text()
    assert engine.registry is not None and done.session is not None
    sandbox = engine.registry.get(done.session, None).sandbox.inner.sandbox  # type: ignore[attr-defined]
    assert isinstance(sandbox, Sandbox) and sandbox.guest_pid is not None
    os.kill(sandbox.guest_pid, signal.SIGKILL)
    with anyio.fail_after(10):
        while sandbox.process.alive():
            await anyio.sleep(0.01)
    again = await engine.execute(USE, session=done.session)
    assert again.stdout.strip() == "42", again.render_text()
    assert again.restored is not None and again.restored.packages == ["tinylib"]


async def test_a_new_task_folder_after_a_release_has_the_packages_too(engine: Codemode) -> None:
    done = await engine.execute("packages.install(['tinylib'])")
    await release(engine, done.session)
    task = await engine.execute(USE, session=done.session, fresh_dir=True)
    assert task.stdout.strip() == "42" and task.task_dir == "tasks/001", task.render_text()
    assert task.restored is not None and task.restored.packages == ["tinylib"]


async def test_a_session_without_installs_says_nothing_of_packages(engine: Codemode) -> None:
    done = await engine.execute("x = 1")
    await release(engine, done.session)
    again = await engine.execute("print('back')", session=done.session)
    assert again.restored is not None and again.restored.packages == []
    assert "packages" not in again.restored.to_dict() and "Packages" not in again.hint


async def test_a_fresh_interpreter_imports_what_the_session_installed(
    index: Index, engine: Codemode
) -> None:
    add_otherlib(index)
    done = await engine.execute("packages.install(['tinylib'])\nx = 1")
    assert done.status == "ok", done.render_text()
    fresh = await engine.execute(
        f"print('x' in globals())\n{USE}", session=done.session, fresh=True
    )
    assert fresh.status == "ok", fresh.render_text()
    assert fresh.stdout.split() == ["False", "42"], "variables cleared, the package still there"
    await assert_import_refused(engine, done.session)


SAVE_ANSWER = (
    "from skills import save\n"
    "def answer() -> int:\n"
    "    '''The answer, from the installed package.'''\n"
    "    import tinylib\n"
    "    return tinylib.VALUE\n"
    "print(save(answer, tests='assert answer() == 42'))\n"
)


async def test_a_skill_names_the_packages_it_imports_and_brings_them_along(
    index: Index, engine: Codemode
) -> None:
    add_otherlib(index)
    done = await engine.execute("packages.install(['tinylib'])\npackages.install(['otherlib'])")
    assert done.status == "ok", done.render_text()
    saved = await engine.execute(SAVE_ANSWER, session=done.session)
    assert "saved skill answer" in saved.stdout, saved.render_text()  # its tests found it
    assert engine.skills is not None and engine.skills.library is not None
    stored = engine.skills.library.store.get("-", "answer")
    assert stored is not None and stored.packages == ("tinylib",), "only what it imports"
    # Another session, which installed nothing: importing the skill brings its package.
    used = await engine.execute("from skills import answer\nprint(answer())")
    assert used.session != done.session
    assert used.status == "ok" and used.stdout.strip() == "42", used.render_text()
    # What no skill of that session names is still refused.
    await assert_import_refused(engine, used.session)


def test_a_checkpoint_stored_before_installs_were_kept_reads_with_none() -> None:
    store = MemoryStore()
    old = msgpack.packb(
        {"owner": "o", "taken_at": 1.0, "archive": b"", "files": [], "variables": {}},
        use_bin_type=True,
    )
    store.set("ckpt:s_old", old, expires_at=None)
    checkpoints = KVCheckpoints(store)
    found = checkpoints.get("s_old")
    assert found is not None and found.packages == () and found.cwd == ""
    kept = Checkpoint("o", 2.0, packages=(("tinylib",), ("a", "b==1")), cwd="tasks/001")
    checkpoints.put("s_new", kept, expires_at=time.time() + 60)
    assert checkpoints.get("s_new") == kept


def test_a_skill_names_only_the_installs_its_code_imports() -> None:
    installs = [("tinylib==1.0",), ("Rich[jupyter]>=13", "numpy"), ("--bad",)]
    code = (
        "def f():\n    import rich.console\n    from tinylib import VALUE\n    from . import x\n",
        "import json\nassert f()",
    )
    assert imported_installs(code, installs) == ("tinylib==1.0", "Rich[jupyter]>=13")
    assert imported_installs(("def broken(:",), installs) == ()

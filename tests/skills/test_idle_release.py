"""Idle sessions give their sandbox back and come back transparently (real bubblewrap
sandboxes, checkpoints in the embedded state store)."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from codemode.catalog.catalog import Catalog
from codemode.checkpoints import Checkpoint, KVCheckpoints
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.idle import IdleReleaser, sweep_interval
from codemode.engine.session import Session
from codemode.errors import WorkspaceFileError
from codemode.gateway.server import build_server
from codemode.policy import PolicySettings
from codemode.sandbox import Limits, SandboxSettings
from codemode.sandbox.runner import Sandbox
from codemode.skills import SkillsSettings

pytestmark = pytest.mark.anyio

WRITE = (
    "import os\n"
    "from state import keep\n"
    "os.makedirs('notes', exist_ok=True)\n"
    "open('notes/todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "scratch = 'not kept'\n"
    "keep('totals')\n"
)
READ = (
    "print(open('notes/todo.txt').read(), totals['pears'], 'scratch' in globals())\n"
    "totals['pears'] += 1\n"
)
ASK_BEFORE_ORDERS = {
    "rules": [{"tools": ["shop.place_order"], "action": "ask", "reason": "orders cost money"}]
}


def config(tmp_path: Path, release_s: float, **sections: Any) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=60, cpu_time_s=5), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state", idle_release_s=release_s),
        **sections,
    )


@pytest.fixture
def make_engine(shop: Any, tmp_path: Path) -> Callable[..., Codemode]:
    def make(release_s: float = 0.2, tools: list[Any] | None = None, **sections: Any) -> Codemode:
        catalog = Catalog([PythonConnector("shop", [*shop.functions(), *(tools or [])])])
        engine_config = config(tmp_path, release_s, **sections)
        return Codemode(engine_config, catalog=catalog, semantic=False, audit=False)

    return make


@pytest.fixture
async def engine(make_engine: Callable[..., Codemode]) -> AsyncIterator[Codemode]:
    """An engine that never releases by itself: the tests sweep when they choose."""
    async with make_engine(release_s=0) as started:
        yield started


def record_of(engine: Codemode, handle: str | None) -> Session:
    assert engine.registry is not None and handle is not None
    return engine.registry.get(handle, None)


def sandbox_of(record: Session) -> Sandbox:
    sandbox = record.sandbox.inner.sandbox  # type: ignore[attr-defined]
    assert isinstance(sandbox, Sandbox)
    return sandbox


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.02)


async def test_an_idle_session_is_released_and_restored_through_the_mcp_client(
    make_engine: Callable[..., Codemode], gateway_factory: Any
) -> None:
    async with make_engine(release_s=0.2) as engine, Client(build_server(engine)) as client:
        gateway = gateway_factory(client)
        wrote = await gateway.execute(WRITE)
        assert wrote["status"] == "ok", wrote
        handle = wrote["session"]
        sandbox = sandbox_of(record_of(engine, handle))
        pids = [sandbox.process.pid, sandbox.guest_pid]
        assert all(pid is not None and alive(pid) for pid in pids)

        await wait_until(lambda: engine.session_states(None).get(handle) == "released")
        # Killed and reaped: neither bwrap nor the guest interpreter is left.
        assert not any(alive(pid) for pid in pids if pid is not None)
        assert record_of(engine, handle).sandbox.inner.sandbox is None  # type: ignore[attr-defined]

        result = await client.call_tool("execute", {"code": READ, "session": handle})
        resumed = dict(result.structured_content or {})
        assert (resumed["status"], resumed["stdout"]) == ("ok", "buy pears 3 False\n"), resumed
        assert resumed["restored"]["files"] == ["notes/todo.txt"]
        assert resumed["restored"]["variables"] == ["totals"]
        assert resumed["restored"]["reason"] == "idle"
        text = result.content[0].text  # type: ignore[union-attr]
        assert "idle, so its sandbox was released" in text and "from state import keep" in text

        # Released again, the kept variable comes back as the last execution left it.
        await wait_until(lambda: engine.session_states(None).get(handle) == "released")
        again = await gateway.execute("print(totals['pears'])", session=handle)
        assert (again["status"], again["stdout"]) == ("ok", "4\n"), again


async def test_an_unchanged_session_is_released_without_a_new_checkpoint_but_kept_longer(
    engine: Codemode,
) -> None:
    wrote = await engine.execute(WRITE)
    assert wrote.status == "ok", wrote.render_text()
    read = await engine.execute("print(totals)", session=wrote.session)  # changes nothing
    assert read.stdout == "{'pears': 3}\n", read.render_text()
    assert engine.skills is not None and isinstance(engine.skills.checkpoints, KVCheckpoints)
    store, key = engine.skills.checkpoints.store, f"ckpt:{wrote.session}"
    before = store.get(key)
    assert before is not None and before.expires_at is not None
    taken = engine.skills.checkpoints.get(wrote.session or "")
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [wrote.session]
    # The checkpoint after the first execution was not taken again (no sandbox run), but it
    # is now kept for a whole session lifetime from the release.
    kept = engine.skills.checkpoints.get(wrote.session or "")
    assert taken is not None and kept is not None and kept.taken_at == taken.taken_at
    after = store.get(key)
    assert after is not None and after.expires_at is not None
    assert after.expires_at > before.expires_at


async def test_an_execute_arriving_during_a_release_waits_and_restores(engine: Codemode) -> None:
    wrote = await engine.execute(WRITE)
    record = record_of(engine, wrote.session)
    releasing, go = threading.Event(), threading.Event()

    def still_idle() -> bool:  # holds the release at its last check, inside its lock
        releasing.set()
        return go.wait(20)

    async with anyio.create_task_group() as group:
        outcome: dict[str, Any] = {}

        async def release() -> None:
            outcome["released"] = await anyio.to_thread.run_sync(record.release, still_idle)

        async def execute() -> None:
            outcome["result"] = await engine.execute(READ, session=wrote.session)

        group.start_soon(release)
        await anyio.to_thread.run_sync(releasing.wait, 20)
        group.start_soon(execute)
        await wait_until(lambda: record.busy == 1)  # checked out, waiting for the release
        go.set()
    assert outcome["released"] is True
    result = outcome["result"]
    assert (result.status, result.stdout) == ("ok", "buy pears 3 False\n"), result.render_text()
    assert result.restored.reason == "idle"


async def test_a_release_during_an_execution_stops_nothing(
    make_engine: Callable[..., Codemode],
) -> None:
    entered, go = threading.Event(), threading.Event()

    def gate() -> str:
        """Wait until the test lets the call return."""
        entered.set()
        go.wait(20)
        return "through"

    async with make_engine(release_s=0, tools=[gate]) as engine:
        wrote = await engine.execute(WRITE)
        record = record_of(engine, wrote.session)
        code = "from servers import shop\nprint(shop.gate(), open('notes/todo.txt').read())"
        async with anyio.create_task_group() as group:
            outcome: dict[str, Any] = {}

            async def execute() -> None:
                outcome["result"] = await engine.execute(code, session=wrote.session)

            group.start_soon(execute)
            await anyio.to_thread.run_sync(entered.wait, 20)  # the code is inside its call
            released = await anyio.to_thread.run_sync(record.release, lambda: True)
            releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
            swept = await anyio.to_thread.run_sync(releaser.sweep)
            go.set()
        assert (released, swept) == (False, [])
        result = outcome["result"]
        assert result.stdout == "through buy pears\n", result.render_text()
        assert result.restored is None and record.sandbox.inner.sandbox is not None  # type: ignore[attr-defined]


async def test_a_session_waiting_for_an_approval_is_never_released(
    make_engine: Callable[..., Codemode], shop: Any
) -> None:
    policy = PolicySettings.from_mapping(ASK_BEFORE_ORDERS, "t")
    async with make_engine(release_s=0.2, policy=policy) as engine:
        paused = await engine.execute(
            "open('order.txt', 'w').write('pears')\n"
            "from servers import shop\n"
            "order = shop.place_order(item='pear', quantity=2)\n"
            "print('ordered', order['number'], open('order.txt').read())\n"
        )
        assert paused.status == "approval_required", paused.render_text()
        guest = sandbox_of(record_of(engine, paused.session)).guest_pid
        other = await engine.execute("x = 1")
        # The other session is released by the same sweeps that pass the paused one by.
        await wait_until(lambda: engine.session_states(None).get(other.session or "") == "released")
        assert engine.session_states(None)[paused.session or ""] == "paused"
        assert guest is not None and alive(guest)
        done = await engine.approve(paused.to_dict()["approval"]["id"], True)
        assert (done.status, done.stdout) == ("ok", "ordered 1 pears\n"), done.render_text()
        assert done.restored is None
        assert shop.orders == [{"item": "pear", "quantity": 2, "number": 1}]


async def test_a_session_whose_checkpoint_cannot_be_saved_keeps_its_sandbox(
    make_engine: Callable[..., Codemode],
) -> None:
    skills = SkillsSettings(max_checkpoint_bytes=20_000)
    async with make_engine(release_s=0, skills=skills) as engine:
        big = await engine.execute("open('big.bin', 'wb').write(b'x' * 50_000)\nn = 7")
        assert big.checkpoint.startswith("not saved")
        releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
        record = record_of(engine, big.session)
        executions = record.sandbox.inner.executions  # type: ignore[attr-defined]
        assert await anyio.to_thread.run_sync(releaser.sweep) == []
        assert engine.session_states(None)[big.session or ""] == "idle"
        # One failed try (the checkpoint program ran once); later sweeps do not try again.
        assert record.sandbox.inner.executions == executions + 1  # type: ignore[attr-defined]
        assert await anyio.to_thread.run_sync(releaser.sweep) == []
        assert record.sandbox.inner.executions == executions + 1  # type: ignore[attr-defined]
        after = await engine.execute(
            "print(n, len(open('big.bin','rb').read()))", session=big.session
        )
        assert after.stdout == "7 50000\n", after.render_text()


async def test_session_states_list_every_state(engine: Codemode) -> None:
    assert engine.session_states(None) == {}
    first = await engine.execute("x = 1")
    assert engine.session_states(None) == {first.session: "idle"}
    assert engine.session_states("someone else") == {}
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [first.session]
    assert engine.session_states(None) == {first.session: "released"}
    after = await engine.execute("print('x' in globals())", session=first.session)
    assert after.stdout == "False\n" and after.restored.files == []
    assert "other variables start empty" in after.hint
    assert engine.session_states(None) == {first.session: "idle"}


async def test_a_released_sessions_files_are_listed_and_read_from_its_checkpoint(
    engine: Codemode,
) -> None:
    wrote = await engine.execute(WRITE + "open('data.bin', 'wb').write(bytes(range(256)) * 40)")
    handle = wrote.session or ""
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [handle]
    listing = await engine.list_files(handle)
    found = {(entry.path, entry.kind, entry.size) for entry in listing.entries}
    assert found == {
        ("data.bin", "file", 10240),
        ("notes", "dir", 0),
        ("notes/todo.txt", "file", 9),
    }
    note = await engine.read_file(handle, "notes/todo.txt")
    assert (note.data, note.mime, note.truncated) == (b"buy pears", "text/plain", False)
    head = await engine.read_file(handle, "data.bin", limit=100)
    assert (head.data, head.size, head.truncated) == (bytes(range(100)), 10240, True)
    with pytest.raises(WorkspaceFileError, match="not a regular file"):
        await engine.read_file(handle, "notes")
    # Nothing of this woke the session: it still holds no sandbox.
    assert engine.session_states(None) == {handle: "released"}
    assert record_of(engine, handle).sandbox.inner.sandbox is None  # type: ignore[attr-defined]


def test_by_default_a_gone_clients_session_stops_costing_within_a_minute() -> None:
    release_s = GatewaySettings().idle_release_s
    assert 0 < release_s and release_s + sweep_interval(release_s) < 60
    assert GatewaySettings.model_validate({"idle_release_s": 0}).idle_release_s == 0


async def test_a_task_started_in_a_fresh_folder_after_a_release_says_what_came_back(
    engine: Codemode,
) -> None:
    wrote = await engine.execute(WRITE)
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [wrote.session]
    task = await engine.execute(
        "print(open('../../notes/todo.txt').read(), totals)", session=wrote.session, fresh_dir=True
    )
    assert task.stdout == "buy pears {'pears': 3}\n", task.render_text()
    assert task.task_dir == "tasks/001"
    assert task.restored.files == ["notes/todo.txt"]
    assert task.hint.startswith("This session was idle, so its sandbox was released")


async def test_a_project_task_goes_on_in_its_folder_after_a_release(engine: Codemode) -> None:
    task = await engine.execute("import os\nprint(os.getcwd())", fresh_dir=True)
    assert task.stdout.strip() == "/workspace/tasks/001", task.render_text()
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [task.session]
    later = await engine.execute(
        "import os\nprint(os.getcwd())\nopen('out.txt', 'w').write('x')", session=task.session
    )
    helper = await engine.execute(
        "open('helper.py', 'w').write('ANSWER = 42')", session=task.session
    )
    assert helper.status == "ok", helper.render_text()
    assert await anyio.to_thread.run_sync(releaser.sweep) == [task.session]
    imported = await engine.execute("import helper\nprint(helper.ANSWER)", session=task.session)
    assert imported.stdout.strip() == "42", "the task's modules import, as before the release"
    assert later.restored is not None, later.render_text()
    assert later.stdout.strip() == "/workspace/tasks/001", "the task's folder, as before"
    assert later.files["created"] == ["tasks/001/out.txt"] and later.task_dir == "tasks/001"
    # A folder the code moved to itself comes back too (a checkpoint taken after the move).
    moved = await engine.execute(
        "import os\nos.makedirs('/workspace/data/raw', exist_ok=True)\n"
        "os.chdir('/workspace/data/raw')",
        session=task.session,
    )
    assert moved.status == "ok", moved.render_text()
    assert await anyio.to_thread.run_sync(releaser.sweep) == [task.session]
    back = await engine.execute("import os\nprint(os.getcwd())", session=task.session)
    assert back.stdout.strip() == "/workspace/data/raw", back.render_text()


async def test_a_release_after_no_file_changed_keeps_the_stored_archive(
    engine: Codemode,
) -> None:
    wrote = await engine.execute(WRITE)  # a checkpoint with the files is taken
    handle = wrote.session or ""
    keeping = record_of(engine, handle).sandbox
    programs: list[str] = []
    execute = keeping.inner.execute  # type: ignore[attr-defined]

    def spy(code: str, **kwargs: Any) -> Any:
        programs.append(code)
        return execute(code, **kwargs)

    keeping.inner.execute = spy  # type: ignore[attr-defined]
    moved = await engine.execute("import os\nos.chdir('notes')", session=handle)
    assert moved.status == "ok" and moved.files["created"] == []
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [handle]
    taken = [code for code in programs if "__codemode_checkpoint(" in code]
    assert len(taken) == 1 and taken[0].rstrip().endswith("del __codemode_checkpoint")
    assert ", False)\n" in taken[0], "the files did not change: they are not archived again"
    back = await engine.execute(
        "import os\nprint(os.getcwd(), open('todo.txt').read())", session=handle
    )
    assert back.stdout.split() == ["/workspace/notes", "buy", "pears"], back.render_text()
    assert back.restored is not None and back.restored.files == ["notes/todo.txt"]


async def test_a_restore_that_fails_after_a_release_is_said_plainly(engine: Codemode) -> None:
    wrote = await engine.execute(WRITE)
    handle = wrote.session or ""
    releaser = IdleReleaser(engine.registry, 0)  # type: ignore[arg-type]
    assert await anyio.to_thread.run_sync(releaser.sweep) == [handle]
    assert engine.skills is not None and engine.skills.checkpoints is not None
    saved = engine.skills.checkpoints.get(handle)
    assert saved is not None  # now spoiled: the sandbox cannot unpack it
    spoiled = Checkpoint(saved.owner, saved.taken_at, b"not a tar archive" * 40, saved.files)
    engine.skills.checkpoints.put(handle, spoiled, expires_at=time.time() + 60)
    after = await engine.execute("import os\nprint(os.path.exists('notes'))", session=handle)
    assert after.stdout == "False\n", after.render_text()
    assert after.restored.error.startswith("the checkpoint could not be restored")
    assert "its files and variables start empty" in after.hint


async def test_after_releasing_the_upkeep_frees_what_cycles_held_and_trims_the_heap(
    make_engine: Callable[..., Codemode], monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.engine import idle

    calls: list[str] = []
    monkeypatch.setattr(idle, "collect_and_trim", lambda: calls.append("collect") or True)
    async with make_engine(release_s=0.2) as engine:
        handle = (await engine.execute("print(1)")).session
        assert calls == []  # nothing released yet: nothing to give back
        await wait_until(lambda: engine.session_states(None).get(handle) == "released")
        await wait_until(lambda: calls == ["collect"], timeout_s=10)


async def test_a_checkpoint_taken_after_an_execution_keeps_the_modules_the_code_imported(
    engine: Codemode,
) -> None:
    """The checkpoint's own program runs with no modules to import: that is not a catalog
    change, and the guest keeps what the code imported (no second import next time)."""
    wrote = await engine.execute(
        "from servers import shop\nopen('notes.txt', 'w').write(str(shop.list_items()))"
    )
    assert wrote.status == "ok", wrote.render_text()
    assert wrote.checkpoint is None or not wrote.checkpoint.startswith("not saved")
    assert engine.skills is not None and engine.skills.checkpoints is not None
    assert engine.skills.checkpoints.get(wrote.session or "") is not None  # one was taken
    again = await engine.execute(
        "import sys\nprint('servers.shop' in sys.modules)", session=wrote.session
    )
    assert (again.status, again.stdout) == ("ok", "True\n"), again.render_text()

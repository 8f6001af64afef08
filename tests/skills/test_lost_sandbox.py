"""A session whose sandbox was killed from outside between two executions (an operator, the
OOM killer, its template gone): the next execution neither hangs nor reports a timeout; it runs
at once in a new sandbox, from the session's checkpoint where there is one, and says what
was lost. Real bubblewrap sandboxes."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings
from codemode.sandbox.runner import Sandbox

pytestmark = pytest.mark.anyio

WRITE = (
    "import os\n"
    "from state import keep\n"
    "open('todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=60), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )
    async with Codemode(config, catalog=Catalog([]), semantic=False, audit=False) as started:
        yield started


def held_sandbox(engine: Codemode, handle: str | None) -> Sandbox:
    assert engine.registry is not None and handle is not None
    sandbox = engine.registry.get(handle, None).sandbox.inner.sandbox  # type: ignore[attr-defined]
    assert isinstance(sandbox, Sandbox)
    return sandbox


async def kill_from_outside(sandbox: Sandbox) -> None:
    pid = sandbox.guest_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # pid 1 of its namespace: every process in it goes
    with anyio.fail_after(10):
        while sandbox.process.alive():
            await anyio.sleep(0.01)


async def test_a_sandbox_killed_between_executions_resumes_from_its_checkpoint(
    engine: Codemode,
) -> None:
    wrote = await engine.execute(WRITE)
    assert wrote.status == "ok", wrote.render_text()
    old = held_sandbox(engine, wrote.session)
    await kill_from_outside(old)

    read = await engine.execute(
        "print(open('todo.txt').read(), totals['pears'])", session=wrote.session
    )
    assert (read.status, read.stdout) == ("ok", "buy pears 3\n"), read.render_text()
    assert read.restored is not None and read.restored.reason == "lost"
    assert read.restored.files == ["todo.txt"] and read.restored.variables == ["totals"]
    assert "lost earlier" in read.hint
    assert held_sandbox(engine, wrote.session) is not old


async def test_a_sandbox_killed_with_nothing_kept_says_what_went(engine: Codemode) -> None:
    first = await engine.execute("x = 41")
    assert first.status == "ok", first.render_text()
    await kill_from_outside(held_sandbox(engine, first.session))

    second = await engine.execute("print(x + 1)", session=first.session)
    # Before, a send to the dead guest was reported as a 60 s timeout, at once.
    assert second.status == "error" and second.error is not None, second.render_text()
    assert second.error["type"] == "NameError"
    assert second.sandbox_reset
    assert "had ended (stopped from outside) before this execution" in second.hint

    third = await engine.execute("x = 1\nprint(x + 1)", session=first.session)
    assert (third.status, third.stdout) == ("ok", "2\n")
    assert "stopped from outside" not in third.hint and not third.sandbox_reset

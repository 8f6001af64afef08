"""Sessions that survive: a limit kill and a gateway restart, through the official MCP client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client

from codemode.engine import Codemode
from codemode.errors import UnknownSessionError
from codemode.gateway.server import build_server

pytestmark = pytest.mark.anyio

WRITE = (
    "import os\n"
    "from state import keep\n"
    "os.makedirs('notes', exist_ok=True)\n"
    "open('notes/todo.txt', 'w').write('buy pears')\n"
    "os.symlink('/etc/passwd', 'link')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)
READ = "print(open('notes/todo.txt').read(), totals['pears'], os.path.exists('link'))"


async def test_a_session_resumes_after_a_limit_kill_and_a_gateway_restart(
    make_engine: Callable[[], Codemode], gateway_factory: Any
) -> None:
    async with make_engine() as engine, Client(build_server(engine)) as client:
        gateway = gateway_factory(client)
        wrote = await gateway.execute(WRITE)
        assert wrote["status"] == "ok", wrote
        handle = wrote["session"]
        killed = await gateway.execute("while True:\n    pass", session=handle)
        assert (killed["status"], killed["limit"]) == ("limit", "cpu_time")
        resumed = await gateway.execute("import os\n" + READ, session=handle)
        assert (resumed["status"], resumed["stdout"]) == ("ok", "buy pears 3 False\n"), resumed
        assert resumed["restored"]["files"] == ["notes/todo.txt"]
        assert resumed["restored"]["variables"] == ["totals"]
        assert "resumed from its checkpoint" in resumed["hint"]

    async with make_engine() as restarted, Client(build_server(restarted)) as client:
        gateway = gateway_factory(client)
        again = await gateway.execute("import os\n" + READ, session=handle)
        assert (again["status"], again["stdout"]) == ("ok", "buy pears 3 False\n"), again
        assert again["session"] == handle
        assert again["restored"]["files"] == ["notes/todo.txt"]
        closed = await restarted.close_session(handle)
        assert closed
        assert restarted.skills is not None and not restarted.skills.resumable(handle, None)


async def test_another_owner_cannot_resume_a_session(make_engine: Callable[[], Codemode]) -> None:
    async with make_engine() as engine:
        wrote = await engine.execute(WRITE, owner="alice")
        handle = wrote.session
    assert handle is not None
    async with make_engine() as restarted:
        assert restarted.skills is not None
        assert restarted.skills.resumable(handle, "alice")
        with pytest.raises(UnknownSessionError, match="unknown or expired session"):
            await restarted.execute("print(1)", session=handle, owner="mallory")


async def test_a_session_resumes_after_its_sandbox_crashed(engine: Codemode) -> None:
    wrote = await engine.execute(WRITE)
    assert wrote.status == "ok", wrote.render_text()
    crashed = await engine.execute("import os\nos._exit(3)", session=wrote.session)
    assert crashed.sandbox_reset
    resumed = await engine.execute("import os\n" + READ, session=wrote.session)
    assert resumed.stdout == "buy pears 3 False\n", resumed.render_text()
    assert resumed.restored.files == ["notes/todo.txt"]


async def test_a_workspace_over_the_limit_is_not_checkpointed_and_the_result_says_so(
    make_engine: Callable[[], Codemode],
) -> None:
    from codemode.skills import SkillsSettings

    engine = make_engine()
    engine.config = engine.config.model_copy(
        update={"skills": SkillsSettings(max_checkpoint_bytes=20_000)}
    )
    async with engine:
        big = await engine.execute("open('big.bin', 'wb').write(b'x' * 50_000)")
        assert big.status == "ok", big.render_text()
        assert big.checkpoint.startswith("not saved")
        assert engine.skills is not None and big.session is not None
        assert not engine.skills.resumable(big.session, None)


async def test_a_checkpoint_leaves_the_codes_imports_alone(engine: Codemode) -> None:
    wrote = await engine.execute("open('a.txt', 'w').write('a')")  # checkpointed after it
    assert wrote.status == "ok", wrote.render_text()
    used = await engine.execute(
        "import servers\nfrom servers import shop\nprint(servers.shop.list_items())",
        session=wrote.session,
    )
    assert used.stdout == "['apple', 'pear']\n", used.render_text()

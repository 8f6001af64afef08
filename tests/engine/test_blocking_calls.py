"""A sync Python tool runs on a tool thread straight from the sandbox's thread.

Through the event loop a call of a sync function took four thread hops (to the loop, from
there to a thread, back to the loop, back to the sandbox's thread), about 400 us; straight to
a tool thread it takes two. What the loop gave it must still hold: the arguments validated,
failures as tool errors, a function that hangs abandoned at the execution's deadline, a cancel
honoured, async functions and callable objects still called on the loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import ToolNotFoundError
from codemode.sandbox import Limits, SandboxSettings

pytestmark = pytest.mark.anyio


class Tools:
    def __init__(self) -> None:
        self.threads: dict[str, str] = {}
        self.release = threading.Event()

    def functions(self) -> dict[str, Callable[..., Any]]:
        def lookup(customer_id: str) -> dict[str, str]:
            """Look a customer up."""
            self.threads["lookup"] = threading.current_thread().name
            return {"id": customer_id, "name": "Ada"}

        def double(n: int) -> int:
            """Double a number."""
            return 2 * n

        def explode() -> None:
            """Fail."""
            raise ValueError("boom")

        def leave() -> None:
            """Call sys.exit (a tool's own failure, not the gateway's exit)."""
            raise SystemExit(3)

        async def leave_later() -> None:
            """The same from an async tool."""
            raise SystemExit(4)

        def hang() -> str:
            """Wait until the test lets go."""
            self.release.wait(30)
            return "late"

        async def later(n: int) -> int:
            """An async tool."""
            self.threads["later"] = threading.current_thread().name
            return n + 1

        def counter(n: int) -> Any:
            """A sync function that returns a coroutine: awaited on the loop, as before."""

            async def minus_one() -> int:
                self.threads["counter"] = threading.current_thread().name
                return n - 1

            return minus_one()

        return {
            "lookup": lookup,
            "double": double,
            "explode": explode,
            "leave": leave,
            "leave_later": leave_later,
            "hang": hang,
            "later": later,
            "counter": counter,
        }


@pytest.fixture
def tools() -> Tools:
    return Tools()


@pytest.fixture
async def engine(tools: Tools) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1)
    )
    catalog = Catalog([PythonConnector("crm", tools.functions())])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        yield engine
    tools.release.set()


async def test_a_sync_tool_runs_on_a_tool_thread_and_not_through_the_loop(
    engine: Codemode, tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    through_loop: list[str] = []
    call = Catalog.call

    def watched(self: Catalog, server: str, tool: str, arguments: dict[str, Any]) -> Awaitable[Any]:
        through_loop.append(tool)
        return call(self, server, tool, arguments)

    monkeypatch.setattr(Catalog, "call", watched)
    code = (
        "from servers import crm\n"
        "print(crm.lookup(customer_id='c7')['id'], crm.double(n='21'), crm.later(n=1),"
        " crm.counter(n=1))\n"
    )
    result = await engine.execute(code, check=False)  # the tool, not the check, coerces "21"
    assert result.status == "ok", result.render_text()
    assert result.stdout.split() == ["c7", "42", "2", "0"]  # "21" coerced, as the loop did
    assert tools.threads["lookup"].startswith("codemode-tool")
    assert through_loop == ["later"]  # the async function, through ``Catalog.call``
    # The coroutine the sync function returned ran on the loop's thread, as the async tool.
    assert tools.threads["counter"] == tools.threads["later"]
    assert not tools.threads["later"].startswith("codemode-tool")


async def test_failures_and_bad_arguments_are_tool_errors(engine: Codemode) -> None:
    code = (
        "from servers import crm\n"
        "calls = (crm.explode, lambda: crm.double(n='many'), crm.leave, crm.leave_later)\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "    except ToolError as error:\n"
        "        print(type(error).__name__, str(error)[:60])\n"
    )
    result = await engine.execute(code, check=False)  # bad arguments reach the tool
    assert result.status == "ok", result.render_text()
    lines = result.stdout.splitlines()
    assert lines[0] == "ToolError crm.explode: ValueError: boom"
    assert lines[1].startswith("ToolError crm.double: invalid arguments for crm.double")
    assert lines[2:] == [
        "ToolError crm.leave: SystemExit: 3",
        "ToolError crm.leave_later: SystemExit: 4",
    ]
    # The engine goes on.
    after = await engine.execute("from servers import crm\nprint(crm.double(n=4))")
    assert after.stdout.strip() == "8", after.render_text()


async def test_a_hanging_sync_tool_is_left_behind_at_the_deadline(
    engine: Codemode, tools: Tools
) -> None:
    started = time.monotonic()
    result = await engine.execute("from servers import crm\ncrm.hang()\n", timeout_s=1.5)
    assert time.monotonic() - started < 6
    assert result.status in ("timeout", "error"), result.render_text()
    tools.release.set()
    # The session goes on: the next call is answered.
    after = await engine.execute(
        "from servers import crm\nprint(crm.double(n=2))", session=result.session
    )
    assert after.stdout.strip() == "4", after.render_text()


async def test_only_known_sync_tools_have_a_blocking_call(engine: Codemode) -> None:
    catalog = Catalog([PythonConnector("crm", {"double": lambda n: n, "later": _later})])
    await catalog.load()
    assert catalog.blocking_call("crm", "double") is not None
    assert catalog.blocking_call("crm", "later") is None  # async: on the loop
    assert catalog.blocking_call("crm", "nope") is None  # the loop's call says it is unknown
    assert catalog.blocking_call("elsewhere", "double") is None
    with pytest.raises(ToolNotFoundError):
        await catalog.call("crm", "nope", {})
    # From code, an unknown tool is the same error as before.
    result = await engine.execute(
        "from servers._runtime import call_tool\ncall_tool('crm', 'nope', {})\n"
    )
    assert result.status == "error" and "nope" in result.render_text()


async def _later(n: int) -> int:
    return n

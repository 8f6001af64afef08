"""A server named like a standard-library module (``time``): its stubs say how to import it so
that both work, and both do in one execution."""

from __future__ import annotations

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings
from codemode.stubs.naming import import_line
from codemode.stubs.render import render_root_init, render_server_init
from codemode.tools import ToolSpec

SPEC = ToolSpec("time", "get_current_time", input_schema={"type": "object", "properties": {}})


def test_the_import_line_renames_only_standard_library_names() -> None:
    assert import_line("time") == "from servers import time as time_server"
    assert import_line("crm") == "from servers import crm"


def test_the_stubs_say_how_to_import_a_shadowing_server() -> None:
    tip = "from servers import time as time_server"
    assert tip in render_root_init({"time": [SPEC], "crm": [SPEC]})
    assert tip in render_server_init("time", [SPEC])
    assert "as crm_server" not in render_root_init({"crm": [SPEC]})


@pytest.mark.anyio
async def test_the_server_and_the_standard_library_in_one_execution() -> None:
    def get_current_time(timezone: str) -> str:
        """The time now in a timezone."""
        return f"12:00 {timezone}"

    config = CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1)
    )
    catalog = Catalog([PythonConnector("time", [get_current_time])])
    code = (
        "from servers import time as time_server\n"
        "import time\n"
        "print(time_server.get_current_time(timezone='UTC'), time.monotonic() > 0)\n"
        "import servers\n"
        "print(servers.__doc__.count('time_server'))\n"
    )
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.render_text()
    assert result.stdout == "12:00 UTC True\n1\n"

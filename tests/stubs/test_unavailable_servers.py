"""Servers that are configured but down are visible to the agent: importing one says why.

The catalog knows two kinds: a broken config entry (``problems``) and a server that failed to
load. The generated ``servers`` package lists both as unavailable, and ``from servers import X``
or ``import servers.X`` raises an ImportError naming the server and the reason, instead of
"cannot import name".
"""

from __future__ import annotations

import importlib
import sys

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings
from codemode.stubs import StubLibrary
from codemode.tools import ToolSpec

JIRA_PROBLEM = "environment variable JIRA_TOKEN is not set (fix: export JIRA_TOKEN=...)"


@pytest.fixture
def import_root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n == "servers" or n.startswith("servers.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def test_written_package_raises_import_errors_that_say_why(import_root):
    library = StubLibrary(
        [ToolSpec("shop", "list_items", source="python")],
        unavailable={"jira-cloud": JIRA_PROBLEM, "shop": "ignored: it has tools"},
    )
    assert library.unavailable == {"jira-cloud": JIRA_PROBLEM}
    library.write_package(import_root)
    assert (import_root / "servers" / "jira_cloud.py").is_file()
    import servers

    assert "jira_cloud: environment variable JIRA_TOKEN is not set" in (servers.__doc__ or "")
    assert dir(servers) == ["ToolError", "shop"]
    with pytest.raises(ImportError) as info:
        from servers import jira_cloud  # noqa: F401
    message = str(info.value)
    assert "server 'jira-cloud' is unavailable: environment variable JIRA_TOKEN" in message
    assert "tell the user" in message
    assert info.value.name == "servers.jira_cloud"
    with pytest.raises(ImportError, match="'jira-cloud' is unavailable"):
        import servers.jira_cloud
    with pytest.raises(AttributeError, match="no server 'nothing'"):
        servers.nothing  # a name nobody configured is still an AttributeError


def test_module_sources_for_the_sandbox():
    library = StubLibrary([], unavailable={"jira": JIRA_PROBLEM})
    source = library.module_source("servers.jira")
    assert source is not None and not library.is_package("servers.jira")
    with pytest.raises(ImportError, match="JIRA_TOKEN"):
        exec(compile(source, "servers/jira.py", "exec"), {})
    assert library.module_source("servers.jira.anything") is None
    root = library.module_source("servers")
    assert root is not None and '_UNAVAILABLE = frozenset({"jira"})' in root


@pytest.mark.anyio
async def test_catalog_names_every_unavailable_server_with_its_reason():
    broken = MCPConnector("broken", StdioTarget("/nonexistent/mcp-server"))
    catalog = Catalog(
        [PythonConnector("shop", [lambda_free_list_items]), broken],
        problems={"jira": JIRA_PROBLEM},
    )
    try:
        await catalog.load()
        down = catalog.unavailable()
    finally:
        await catalog.aclose()
    assert list(down) == ["jira", "broken"]
    assert down["jira"] == JIRA_PROBLEM
    assert "command not found" in down["broken"]
    with pytest.raises(ValueError, match="have a connector and a config problem"):
        Catalog([PythonConnector("jira", [lambda_free_list_items])], problems={"jira": "x"})


def lambda_free_list_items() -> list[str]:
    """List the items for sale."""
    return ["apple", "pear"]


@pytest.mark.anyio
async def test_the_agent_sees_why_through_a_real_sandbox():
    broken = MCPConnector("notes", StdioTarget("/nonexistent/notes-server"))
    catalog = Catalog(
        [PythonConnector("shop", [lambda_free_list_items]), broken],
        problems={"jira": JIRA_PROBLEM},
    )
    config = CodemodeConfig(
        servers={}, sandbox=SandboxSettings(limits=Limits(wall_time_s=20), pool_size=1)
    )
    code = """
import servers
try:
    from servers import jira
except ImportError as error:
    print("from:", type(error).__name__, error)
try:
    import servers.notes
except ImportError as error:
    print("import:", type(error).__name__, error)
from servers import shop
print("shop:", shop.lambda_free_list_items())
print("doc:", "notes:" in servers.__doc__, "jira:" in servers.__doc__)
"""
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        result = await engine.execute(code)
    assert result.status == "ok", result.to_dict()
    lines = result.stdout.splitlines()
    assert lines[0].startswith("from: ImportError server 'jira' is unavailable: environment")
    assert "JIRA_TOKEN" in lines[0]
    assert lines[1].startswith("import: ImportError server 'notes' is unavailable:")
    assert "command not found" in lines[1]
    assert lines[2:] == ["shop: ['apple', 'pear']", "doc: True True"]


def test_the_call_check_leaves_unavailable_servers_to_their_import_error():
    from codemode.checks.calls import check_calls
    from codemode.checks.signatures import SignatureTable

    table = SignatureTable.from_specs([ToolSpec("shop", "list_items")], {"jira": JIRA_PROBLEM})
    assert check_calls("from servers import jira\nimport servers.jira as j\n", table) == []
    problems = check_calls("from servers import nothing\n", table)
    assert len(problems) == 1 and "no server 'nothing'" in str(problems[0])

"""Unannotated MCP tools are destructive, as the MCP spec's defaults say: they ask by default.

The upstream is a real MCP server over stdio whose write tools carry no annotations, like
mcp-server-sqlite's ``write_query`` (tests/connectors/sqlite_like_server.py).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.engine import Codemode
from codemode.policy import PolicySettings
from codemode.sandbox import Limits, SandboxSettings
from codemode.tools import AnnotationsDefault

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parents[1] / "connectors" / "sqlite_like_server.py"
CODE = """
from servers import sqlite
print(sqlite.echo(text="reads run"))
print(sqlite.create_table(name="users"))
print(sqlite.list_tables())
"""


def sqlite_catalog(annotations_default: AnnotationsDefault = "mcp") -> Catalog:
    target = StdioTarget(sys.executable, [str(SERVER)])
    connector = MCPConnector(
        "sqlite", target, start_timeout_s=30, annotations_default=annotations_default
    )
    return Catalog([connector])


def config(**policy: object) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=30), pool_size=1),
        policy=PolicySettings.from_mapping(policy, "test"),
    )


async def test_startup_says_once_which_tools_ask_because_they_carry_no_annotations(caplog):
    catalog = sqlite_catalog()
    with caplog.at_level(logging.WARNING, logger="codemode.catalog.catalog"):
        try:
            await catalog.load()
            await catalog.load()
        finally:
            await catalog.aclose()
    said = [r.getMessage() for r in caplog.records if "without annotations" in r.getMessage()]
    assert len(said) == 1
    assert "sqlite (3 of 5)" in said[0]
    assert "MCP spec's defaults" in said[0] and 'annotations_default = "read_only"' in said[0]


async def test_a_read_only_server_setting_silences_it(caplog):
    catalog = sqlite_catalog("read_only")
    with caplog.at_level(logging.WARNING, logger="codemode.catalog.catalog"):
        try:
            await catalog.load()
        finally:
            await catalog.aclose()
    assert not [r for r in caplog.records if "without annotations" in r.getMessage()]
    assert all(spec.read_only and spec.destructive is False for spec in catalog.specs())


async def test_an_unannotated_write_asks_before_it_runs():
    catalog = sqlite_catalog()
    async with Codemode(config(), catalog=catalog, semantic=False, audit=False) as engine:
        paused = await engine.execute(CODE)
        assert paused.status == "approval_required", paused.to_dict()
        approval = paused.to_dict()["approval"]
        assert approval["tool"] == "sqlite.create_table"  # the read-only echo did not ask
        assert "no annotations" in approval["reason"] and "MCP default" in approval["reason"]
        denied = await engine.approve(approval["id"], False)
        tables = await catalog.call("sqlite", "list_tables", {})
    assert denied.status == "error" and denied.stdout == "reads run\n"
    assert tables.value == "[]"  # the write never reached the server


async def test_approvals_set_to_deny_stop_an_unannotated_write():
    catalog = sqlite_catalog()
    async with Codemode(
        config(destructive="deny"), catalog=catalog, semantic=False, audit=False
    ) as engine:
        result = await engine.execute(CODE)
        tables = await catalog.call("sqlite", "list_tables", {})
    assert result.status == "error" and result.error is not None
    assert "sqlite.create_table" in result.error["message"]
    assert tables.value == "[]"  # the write never reached the server


@pytest.mark.parametrize(
    ("annotations_default", "policy"),
    [
        ("not_destructive", {}),
        ("mcp", {"read_only_tools": ["sqlite.create_table", "sqlite.list_tables"]}),
    ],
)
async def test_config_can_mark_a_server_or_a_tool_as_safe(annotations_default, policy):
    catalog = sqlite_catalog(annotations_default)
    async with Codemode(config(**policy), catalog=catalog, semantic=False, audit=False) as engine:
        result = await engine.execute(CODE)
    assert result.status == "ok", result.to_dict()
    assert result.stdout == "reads run\ncreated users\n[{'name': 'users'}]\n"


def test_the_server_setting_in_the_config(tmp_path):
    from codemode.config import load_config
    from codemode.connectors.factory import build_connector

    path = tmp_path / "codemode.toml"
    entry = f'[servers.sqlite]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
    path.write_text(entry + 'annotations_default = "read_only"\n')
    server = load_config(path).servers["sqlite"]
    connector = build_connector("sqlite", server)
    assert isinstance(connector, MCPConnector)
    assert connector.annotations_default == "read_only"
    path.write_text(entry)
    assert load_config(path).servers["sqlite"].fingerprint() != server.fingerprint()
    path.write_text(entry + 'annotations_default = "trusted"\n')
    broken = load_config(path)  # a broken server is disabled alone, with its reason
    assert "sqlite" not in broken.servers
    assert "servers.sqlite.annotations_default" in broken.server_problems["sqlite"]
    assert "'not_destructive'" in broken.server_problems["sqlite"]
    path.write_text('[servers.api]\nopenapi = "spec.json"\nannotations_default = "read_only"\n')
    assert "annotations_default" in load_config(path).server_problems["api"]

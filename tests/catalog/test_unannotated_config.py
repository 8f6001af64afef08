"""Tools without annotations, once config marks them: the startup warning stops counting them,
`codemode doctor` lists the rest with the exact config lines, and each stub says what the
policy will do with its calls. The upstream is a real MCP server over stdio
(tests/connectors/sqlite_like_server.py: list_tables, create_table and drop_table declare no
annotations)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.cli.main import main
from codemode.config import CodemodeConfig
from codemode.connectors.mcp import MCPConnector, StdioTarget
from codemode.engine import Codemode
from codemode.policy import Policy, PolicySettings
from codemode.policy.unannotated import policy_note, unannotated_advice
from codemode.sandbox import SandboxSettings
from codemode.tools import ToolSpec

SERVER = Path(__file__).resolve().parents[1] / "connectors" / "sqlite_like_server.py"


def sqlite_catalog(policy: PolicySettings | None = None) -> Catalog:
    connector = MCPConnector(
        "sqlite", StdioTarget(sys.executable, [str(SERVER)]), start_timeout_s=30
    )
    return Catalog([connector], policy=policy)


def policy(**table: object) -> PolicySettings:
    return PolicySettings.from_mapping(table, "test")


async def _warnings(catalog: Catalog, caplog: pytest.LogCaptureFixture) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="codemode.catalog.catalog"):
        try:
            await catalog.load()
        finally:
            await catalog.aclose()
    return [r.getMessage() for r in caplog.records if "without annotations" in r.getMessage()]


@pytest.mark.anyio
async def test_the_startup_warning_names_the_tools_and_the_config_lines(caplog):
    [said] = await _warnings(sqlite_catalog(), caplog)
    assert "sqlite (3 of 5): list_tables, create_table, drop_table" in said
    assert (
        '[policy] read_only_tools = ["sqlite.list_tables", "sqlite.create_table", '
        '"sqlite.drop_table"]' in said
    )
    assert 'annotations_default = "read_only" or "not_destructive" in [servers.sqlite]' in said


@pytest.mark.anyio
async def test_tools_marked_in_read_only_tools_are_no_longer_counted(caplog):
    [said] = await _warnings(sqlite_catalog(policy(read_only_tools=["sqlite.list_tables"])), caplog)
    assert "sqlite (2 of 5): create_table, drop_table" in said
    assert "list_tables" not in said
    caplog.clear()
    marked = policy(read_only_tools=["sqlite.*_table*"])
    assert await _warnings(sqlite_catalog(marked), caplog) == []
    allowed = policy(rules=[{"tools": ["sqlite.*"], "action": "allow"}])
    assert await _warnings(sqlite_catalog(allowed), caplog) == []


UNANNOTATED = ToolSpec("sqlite", "list_tables")
NOTES = [
    (
        {},
        UNANNOTATED,
        "asks for approval (no annotations; mark it read-only with [policy] read_only_tools = "
        '["sqlite.list_tables"])',
    ),
    ({"read_only_tools": ["sqlite.list_tables"]}, UNANNOTATED, "read-only by config"),
    ({}, ToolSpec("sqlite", "echo", read_only=True), "read-only"),
    ({}, ToolSpec("crm", "drop", destructive=True), "destructive: asks for approval"),
    ({"destructive": "deny"}, UNANNOTATED, "denied by the policy (see [policy])"),
    (
        {"rules": [{"tools": ["sqlite.*"], "action": "ask"}]},
        ToolSpec("sqlite", "echo", read_only=True),
        "asks for approval (policy.rules[0])",
    ),
    ({}, ToolSpec("crm", "note", destructive=False), None),
]


@pytest.mark.parametrize(("table", "spec", "note"), NOTES)
def test_policy_note_says_what_the_policy_will_do(table, spec, note):
    assert policy_note(spec, Policy(policy(**table))) == note


def test_no_advice_when_nothing_asks_for_want_of_annotations():
    assert unannotated_advice([ToolSpec("sqlite", "echo", read_only=True)], policy()) is None


@pytest.mark.anyio
async def test_stubs_follow_the_config():
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=0),
        policy=policy(read_only_tools=["sqlite.list_tables"]),
    )
    async with Codemode(config, catalog=sqlite_catalog(), semantic=False, audit=False) as engine:
        stubs = (await engine.views()).stubs
        listed = " ".join(stubs.tool_source("sqlite", "list_tables").split())
        created = " ".join(stubs.tool_source("sqlite", "create_table").split())
    assert "read-only by config" in listed
    assert "destructive by default" not in listed + created
    assert "asks for approval (no annotations; mark it read-only with [policy]" in created


def test_doctor_lists_them_with_the_config_that_marks_them(tmp_path, capsys):
    config = tmp_path / "codemode.toml"
    server = f'[servers.sqlite]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
    state = f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
    config.write_text(server + state)
    main(["doctor", "--json", "--config", str(config)])
    printed = capsys.readouterr()
    checks = {c["name"]: c for c in json.loads(printed.out)["checks"]}
    assert "without annotations" not in printed.err  # said once, in the check
    annotations = checks["annotations"]
    assert annotations["level"] == "warn"
    assert "3 tools ask for approval" in annotations["detail"]
    assert "sqlite (3 of 5): list_tables, create_table, drop_table" in annotations["detail"]
    assert '[policy] read_only_tools = ["sqlite.list_tables"' in annotations["fix"]

    marked = '[policy]\nread_only_tools = ["sqlite.list_tables", "sqlite.*_table"]\n'
    config.write_text(server + state + marked)
    main(["doctor", "--json", "--config", str(config)])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["annotations"]["level"] == "ok", checks["annotations"]

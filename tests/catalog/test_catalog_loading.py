"""open_catalog: from a config file to a loaded catalog; the cache spares restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.catalog import open_catalog, server_name_for_spec
from codemode.connectors.mcp import MCPConnector

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("stripe-spec3-2023-09-12.json.gz", "stripe_spec3_2023_09_12"),
        ("/x/GitHub API.yaml", "github_api"),
        ("3d-printing.json", "spec_3d_printing"),
        ("---.json", "spec"),
    ],
)
def test_server_name_for_spec(path, name):
    assert server_name_for_spec(Path(path)) == name


def config_with(tmp_path: Path, fake_server_argv: list[str]) -> Path:
    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n    '''Upper-case text.'''\n    return text.upper()\n\n"
        "TOOLS = [shout]\n"
    )
    command, *args = fake_server_argv
    path = tmp_path / "codemode.toml"
    path.write_text(
        f"""
[servers.fake]
command = "{command}"
args = {args!r}
tools = ["add", "grow", "extra"]

[servers.local]
python = "mytools:TOOLS"

[servers.broken]
command = "/nonexistent/server"

[servers.jira]
command = "jira-server"
env = {{ JIRA_TOKEN = "${{CODEMODE_TEST_NEVER_SET}}" }}

[gateway]
state_dir = "state"
""".replace("'", '"')
    )
    return path


async def test_open_catalog_then_restart_uses_cache(tmp_path, fake_server_argv):
    path = config_with(tmp_path, fake_server_argv)
    catalog = await open_catalog(path)
    try:
        assert list(catalog.failures) == ["broken"]
        assert "command not found" in catalog.failures["broken"]
        down = catalog.unavailable()  # config problems and failed loads, for the agent
        assert sorted(down) == ["broken", "jira"]
        assert "CODEMODE_TEST_NEVER_SET" in down["jira"]
        names = sorted(spec.qualified_name for spec in catalog.specs())
        assert names == ["fake.add", "fake.grow", "local.shout"]
        assert (await catalog.call("local", "shout", {"text": "hi"})).value == "HI"
    finally:
        await catalog.aclose()
    assert (tmp_path / "state" / "definitions.sqlite").is_file()

    again = await open_catalog(path)
    try:
        fake = again.connector("fake").inner  # type: ignore[attr-defined]
        assert isinstance(fake, MCPConnector)
        assert fake.starts == 0  # tools came from the cache: nothing was spawned
        assert sorted(s.qualified_name for s in again.specs()) == names
        assert (await again.call("fake", "add", {"a": 2, "b": 2})).value == 4
        assert fake.starts == 1
    finally:
        await again.aclose()


async def test_default_state_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "st"))
    path = tmp_path / "c.toml"
    path.write_text("")
    catalog = await open_catalog(path)
    assert catalog.specs() == [] and catalog.failures == {}
    await catalog.aclose()
    assert (tmp_path / "st" / "definitions.sqlite").is_file()


async def test_openapi_spec_becomes_a_server(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "st"))
    spec = {
        "openapi": "3.0.0",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {
            "/pets": {"get": {"operationId": "listPets", "summary": "List pets", "responses": {}}}
        },
    }
    spec_path = tmp_path / "pet-store.v1.json"
    spec_path.write_text(json.dumps(spec))
    config = tmp_path / "c.toml"
    config.write_text("")
    catalog = await open_catalog(config, [spec_path])
    try:
        assert catalog.failures == {}
        (tool,) = catalog.specs()
        assert tool.server == "pet_store" and tool.source == "openapi"
        assert tool.operation_id == "listPets"
    finally:
        await catalog.aclose()

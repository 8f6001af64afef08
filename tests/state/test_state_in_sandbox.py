"""``from state import kv, shared`` in real sandboxes, with the embedded store and with Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.sandbox import Limits, SandboxSettings
from codemode.settings.state import StateSettings
from codemode.skills import SkillsSettings

pytestmark = pytest.mark.anyio

WRITE = (
    "from state import kv, shared\n"
    "kv.set('cursor', {'page': 3})\n"
    "shared.set('greeting', 'hello')\n"
    "print(shared.incr('runs'), kv.get('cursor'))\n"
)


@pytest.fixture(params=["embedded", "redis"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> CodemodeConfig:
    state = StateSettings()
    if request.param == "redis":
        state = StateSettings(redis_url=request.getfixturevalue("redis_server").url)
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
        state=state,
    )


def engine(config: CodemodeConfig) -> Codemode:
    return Codemode(config, catalog=Catalog([]), semantic=False, audit=False)


async def test_values_outlive_executions_sessions_and_restarts(config: CodemodeConfig) -> None:
    async with engine(config) as first:
        wrote = await first.execute(WRITE)
        assert wrote.status == "ok", wrote.render_text()
        assert wrote.stdout == "1 {'page': 3}\n"
        again = await first.execute("print(kv.get('cursor')['page'])", session=wrote.session)
        assert again.stdout == "3\n"
        other = await first.execute(
            "from state import kv, shared\nprint(kv.get('cursor'), shared.get('greeting'))"
        )
        assert other.stdout == "None hello\n"  # kv is per session, shared per owner
    async with engine(config) as restarted:  # a gateway restart: the durable tier serves
        result = await restarted.execute(
            "from state import shared\nprint(shared.get('greeting'), shared.incr('runs'))"
        )
        assert result.stdout == "hello 2\n", result.render_text()


async def test_closing_a_session_deletes_its_values(config: CodemodeConfig) -> None:
    async with engine(config) as codemode:
        wrote = await codemode.execute(WRITE)
        assert codemode.state_store is not None
        assert codemode.state_store.get(f"s:{wrote.session}:cursor") is not None
        assert await codemode.close_session(wrote.session)
        assert codemode.state_store.get(f"s:{wrote.session}:cursor") is None


async def test_bad_values_and_keys_are_clear_errors_in_the_code(config: CodemodeConfig) -> None:
    code = (
        "from state import kv\n"
        "for attempt in (lambda: kv.set('k', float('nan')), lambda: kv.set('', 1),\n"
        "                lambda: kv.set('k', 'x' * 2_000_000), lambda: kv.incr('s')):\n"
        "    kv.set('s', 'text')\n"
        "    try:\n"
        "        attempt()\n"
        "    except ToolError as error:\n"
        "        print(str(error)[:40])\n"
    )
    async with engine(config) as codemode:
        result = await codemode.execute(code)
    assert result.status == "ok", result.render_text()
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert "JSON" in lines[0] or "serial" in lines[0].lower()
    assert lines[1].startswith("state: a key is")
    assert lines[2].startswith("state: a value is at most")
    assert lines[3].startswith("state: incr works only")


async def test_a_workspace_module_named_like_a_host_root_still_imports(
    config: CodemodeConfig,
) -> None:
    """``skills`` is served by the host only when the host has it (skills enabled); otherwise
    it falls through to the code's own modules (``servers`` never does)."""
    code = (
        "import importlib\n"
        "open('skills.py', 'w').write('X = 7')\n"
        "importlib.invalidate_caches()\n"
        "import skills\n"
        "print(skills.X)\n"
    )
    config = config.model_copy(update={"skills": SkillsSettings(enabled=False)})
    async with engine(config) as codemode:
        result = await codemode.execute(code)
    assert result.stdout == "7\n", result.render_text()

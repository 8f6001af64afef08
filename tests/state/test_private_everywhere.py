"""Stored data only its owner can read from every entry point: a library user's engine (no CLI,
so no private umask) under the common umask 0022 creates every file 0600 and every directory
0700 (state, audit, approvals, skills, checkpoints, caches, exported files), and ``serve``
runs with a private umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.files.export import save_workspace
from codemode.policy import PolicySettings
from codemode.sandbox import Limits, SandboxSettings
from codemode.settings.sandbox import PackageSettings
from tests.conftest import Program

ASK_ORDERS = {"rules": [{"tools": ["shop.place_order"], "action": "ask", "reason": "money"}]}

SESSION = '''\
from state import kv, keep
from skills import save
kv.set("secret", {"card": "4111"})
notes = "what alice found"
keep("notes")
with open("report.txt", "w") as out:
    out.write("alice's report")

def first_item() -> str:
    """The first item for sale."""
    return shop.list_items()[0]

from servers import shop
print(save(first_item, tests="assert first_item() == 'apple'"))
'''


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The umask most systems default to (0022: files 0644, directories 0755)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def loose(root: Path) -> list[str]:
    """Every path under ``root`` (itself included) that is not 0600 (files) or 0700 (dirs)."""
    found = []
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if stat.S_IMODE(info.st_mode) != wanted:
            found.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(info.st_mode):04o}")
    return found


@pytest.mark.anyio
async def test_a_library_users_session_leaves_only_private_files(
    tmp_path: Path, shop: Any, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(
            limits=Limits(wall_time_s=20, cpu_time_s=5),
            pool_size=1,
            packages=PackageSettings(cache_dir=str(tmp_path / "packages")),
        ),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
        policy=PolicySettings.model_validate(ASK_ORDERS),
    )
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        await engine.search("list the items for sale")
        ran = await engine.execute(SESSION, client="alice")
        assert ran.status == "ok" and "saved skill" in ran.stdout, ran.render_text()
        assert ran.session is not None
        # An approval whose arguments are long enough to go to a file.
        order = f"from servers import shop\nshop.place_order(item={'x' * 5000!r}, quantity=1)"
        paused = await engine.execute(order, client="alice")
        assert paused.status == "approval_required", paused.render_text()
        assert engine.registry is not None
        assert await anyio.to_thread.run_sync(engine.registry.release_now, ran.session)
        saved = await save_workspace(engine, ran.session, tmp_path / "export")
        assert isinstance(saved["report.txt"], Path), saved
    created = [tmp_path / name for name in ("state", "cache", "export")]
    assert (tmp_path / "state" / "approvals").is_dir()  # the approval's file was written
    assert list((tmp_path / "state" / "skills").rglob("SKILL.md"))
    assert [entry for root in created for entry in loose(root)] == []


def test_serve_runs_with_a_private_umask(codemode_program: Program) -> None:
    program = (
        "import asyncio, os\n"
        "import codemode.gateway.serve as serving\n"
        "class Engine:\n"
        "    def __init__(self, *args, **kwargs): pass\n"
        "    async def __aenter__(self): raise SystemExit(f'umask {os.umask(0o022):o}')\n"
        "    async def __aexit__(self, *exc): return None\n"
        "serving.Codemode = Engine\n"
        "from codemode.config import CodemodeConfig\n"
        "os.umask(0o022)\n"
        "asyncio.run(serving.serve(CodemodeConfig(servers={})))\n"
    )
    done = codemode_program(program)
    assert done.stderr.strip().splitlines()[-1] == "umask 77", done.stderr

"""Skills in ``search``: beside the tools (which keep their ranking), ordered by track record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox.inprocess import InProcessSandboxes
from codemode.skills.model import Skill

pytestmark = pytest.mark.anyio


@pytest.fixture
async def twin(shop: Any, tmp_path: Path) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(servers={}, gateway=GatewaySettings(state_dir=tmp_path))
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(
        config, catalog=catalog, sandboxes=InProcessSandboxes(), semantic=False, audit=False
    ) as engine:
        yield engine


def skill(name: str, description: str) -> Skill:
    return Skill(
        name=name,
        owner="-",
        description=description,
        source=f"def {name}():\n    return 1\n",
        tests=f"from skills import {name}\nassert {name}() == 1\n",
        signature=f"{name}()",
    )


async def test_many_skills_leave_the_tool_hits_as_they_were(twin: Codemode) -> None:
    before = await twin.search("place an order", limit=2)
    assert twin.skills is not None and twin.skills.library is not None
    for i in range(200):
        twin.skills.library.store.put(skill(f"order_helper_{i}", f"Place an order variant {i}"))
    after = await twin.search("place an order", limit=2)
    tools = [hit for hit in after.hits if hit.get("kind") != "skill"]
    assert tools == before.hits
    assert len(after.hits) - len(tools) == 3  # at most three skills, listed after the tools
    assert after.text.startswith(before.text)


async def test_a_better_track_record_ranks_first(twin: Codemode) -> None:
    assert twin.skills is not None and twin.skills.library is not None
    library = twin.skills.library
    good, flaky = (
        skill("tidy_address", "Tidy a postal address"),
        skill("clean_address", "Tidy a postal address"),
    )
    library.store.put(good)
    library.store.put(flaky)
    for _ in range(3):
        library.usage.ran(good, True)
        library.usage.ran(flaky, False)
    answer = await twin.search("tidy a postal address")
    names = [hit["python_name"] for hit in answer.hits if hit.get("kind") == "skill"]
    assert names == ["skills.tidy_address", "skills.clean_address"]
    assert "0/3 executions ok" in answer.text and "3/3 executions ok" in answer.text


async def test_saving_and_importing_work_over_the_in_process_twin(twin: Codemode) -> None:
    code = (
        "from skills import save\n"
        "print(save('def inc(x):\\n    return x + 1\\n', name='inc', description='Add one',\n"
        "           tests='from skills import inc\\nassert inc(1) == 2'))\n"
    )
    saved = await twin.execute(code)
    assert saved.stdout.startswith("saved skill inc (tests passed)"), saved.render_text()
    used = await twin.execute("from skills import inc\nprint(inc(2))")
    assert used.stdout == "3\n", used.render_text()

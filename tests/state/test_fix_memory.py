"""The fix memory: a failure then a fix is remembered; the same error later gets the hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.memory import KVFixes, MemoryFixes, error_signature
from codemode.memory.learning import short_diff
from codemode.sandbox import Limits, SandboxSettings
from codemode.state.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

BROKEN = (
    "from servers import shop\n"
    "order = shop.place_order(item='pear', qty=2)\n"
    "print(order['number'])\n"
)
FIXED = BROKEN.replace("qty=2", "quantity=2")


def test_signatures_ignore_the_variable_parts() -> None:
    one = error_signature({"type": "KeyError", "message": "'lead_17'"})
    two = error_signature({"type": "KeyError", "message": "'lead_9921'"})
    assert one == two
    tool = error_signature({"type": "ToolError", "message": "crm.get_lead: no lead LEAD-0137"})
    assert tool is not None and tool.endswith("| crm.get_lead")
    assert error_signature({"type": "ToolError", "message": "crm.get_lead: timed out"}) != tool
    assert error_signature(None) is None


def test_short_diff_keeps_only_changed_lines() -> None:
    assert short_diff(BROKEN, FIXED) == (
        "-order = shop.place_order(item='pear', qty=2)\n"
        "+order = shop.place_order(item='pear', quantity=2)"
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_stores_are_bounded_deduplicated_and_removable(kind: str, tmp_path: Path) -> None:
    state = SQLiteStore(tmp_path / "f")
    store = MemoryFixes(per_owner=3) if kind == "memory" else KVFixes(state, per_owner=3)
    for n in range(5):
        store.remember("me", f"sig{n}", f"diff{n}")
    store.remember("me", "sig4", "newer")
    store.remember("you", "sig0", "yours")
    mine = store.entries("me")
    assert [fix.signature for fix in mine] == ["sig2", "sig3", "sig4"]
    recalled = store.recall("me", "sig4")
    assert recalled is not None and (recalled.diff, recalled.uses) == ("newer", 1)
    assert store.recall("me", "sig0") is None and store.recall("you", "sig0") is not None
    assert store.forget("me", "sig3") == 1
    assert store.forget("me") == 2
    assert store.entries("me") == []
    store.close()
    state.close()


@pytest.fixture
def config(tmp_path: Path) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=10), pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )


async def test_a_fixed_error_is_remembered_and_offered_next_time(
    config: CodemodeConfig, shop: Any
) -> None:
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        failed = await engine.execute(BROKEN)
        assert failed.status == "error" and "fixed before" not in failed.hint
        fixed = await engine.execute(FIXED, session=failed.session)
        assert fixed.status == "ok", fixed.render_text()
        assert engine.fix_memory is not None
        [entry] = engine.fix_memory.entries("-")
        assert "+order = shop.place_order(item='pear', quantity=2)" in entry.diff
    # A new engine on the same state (a restart), a new session: the same mistake.
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        again = await engine.execute(BROKEN.replace("pear", "apple"))
    assert again.status == "error"
    assert "This error was fixed before with:" in again.hint
    assert "quantity=2" in again.hint


async def test_an_unrelated_success_is_not_taken_for_a_fix(
    config: CodemodeConfig, shop: Any
) -> None:
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        failed = await engine.execute(BROKEN)
        await engine.execute("print('something else entirely')", session=failed.session)
        assert engine.fix_memory is not None
        assert engine.fix_memory.entries("-") == []


async def test_a_fix_after_looking_around_comes_back_in_a_later_session(
    config: CodemodeConfig, shop: Any
) -> None:
    broken = "from servers import shop\nitems = shop.list_items()\nprint(items['apple'])\n"
    fixed = "from servers import shop\nitems = shop.list_items()\nprint(items[0])\n"
    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        failed = await engine.execute(broken)
        assert failed.status == "error" and failed.error is not None
        assert failed.error["type"] == "TypeError"
        # Looking at the value first (a success that is not the fix), then the fix.
        looked = await engine.execute("print(type(shop.list_items()))", session=failed.session)
        assert looked.status == "ok"
        assert (await engine.execute(fixed, session=failed.session)).status == "ok"
        other = await engine.execute("print(1)")  # a second session of the same owner
        assert other.session != failed.session
        again = await engine.execute(broken, session=other.session)
    assert again.status == "error"
    assert "This error was fixed before with:" in again.hint and "items[0]" in again.hint

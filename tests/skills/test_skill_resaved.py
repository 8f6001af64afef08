"""A skill saved again while a session has it imported: the session's next import gets the new
version (the write, run, fix loop), not the module its sandbox kept from before."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.engine import Codemode

pytestmark = pytest.mark.anyio


def save_label(version: str) -> str:
    return (
        "from skills import save\n"
        "def shelf_label(name: str) -> str:\n"
        '    """A shelf label for an item."""\n'
        f"    return '{version}:' + name.upper()\n"
        f"print(save(shelf_label, tests=\"assert shelf_label('a') == '{version}:A'\"))\n"
    )


USE = "from skills import shelf_label\nprint(shelf_label('pears'))\n"


async def test_a_resaved_skill_is_imported_anew_in_the_same_session(gateway: Any) -> None:
    saved = await gateway.execute(save_label("v1"))
    assert saved["status"] == "ok" and "saved skill shelf_label" in saved["stdout"], saved
    session = saved["session"]
    first = await gateway.execute(USE, session=session)
    assert first["stdout"].strip() == "v1:PEARS", first

    resaved = await gateway.execute(save_label("v2"), session=session)
    assert "saved skill shelf_label" in resaved["stdout"], resaved
    fixed = await gateway.execute(USE, session=session)
    assert fixed["stdout"].strip() == "v2:PEARS", fixed
    # What the session kept is untouched, and an unchanged skill stays imported.
    again = await gateway.execute(
        "import sys\nprint('skills.shelf_label' in sys.modules, shelf_label('figs'))",
        session=session,
    )
    assert again["stdout"].strip() == "True v2:FIGS", again


async def test_a_skill_deleted_elsewhere_is_no_longer_imported(
    engine: Codemode, gateway: Any
) -> None:
    saved = await gateway.execute(save_label("v1"))
    session = saved["session"]
    assert (await gateway.execute(USE, session=session))["stdout"].strip() == "v1:PEARS"
    assert engine.skills is not None and engine.skills.library is not None
    assert engine.skills.library.store.delete("-", "shelf_label")
    gone = await gateway.execute(USE, session=session)
    assert gone["status"] == "error" and gone["error"]["type"] in (
        "ImportError",
        "ModuleNotFoundError",
    ), gone

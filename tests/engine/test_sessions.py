"""Session bookkeeping in the engine."""

from __future__ import annotations

import anyio
import pytest

from codemode.engine import Codemode

pytestmark = pytest.mark.anyio


async def test_a_caller_that_goes_away_does_not_pin_its_session(engine: Codemode):
    first = await engine.execute("x = 1")
    assert engine.registry is not None
    record = engine.registry.get(first.session, None)
    with anyio.move_on_after(0.3):
        await engine.execute("import time\ntime.sleep(1)", session=first.session)
    # The cancelled execution is stopped; once it has, the session is free again.
    with anyio.fail_after(10):
        while record.busy:
            await anyio.sleep(0.05)
    after = await engine.execute("print(x)", session=first.session)
    assert after.stdout == "1\n"


async def test_a_session_reaches_the_catalog_as_it_is_at_each_execution(engine: Codemode, shop):
    """What an execution may reach is kept between a session's executions while the catalog
    is unchanged, and made anew once it changed: a tool added is callable in the same session
    from the next execution on, and a tool gone is refused there."""
    from codemode.connectors.python import PythonConnector

    first = await engine.execute("from servers import shop\nprint(shop.list_items())")
    assert first.status == "ok", first.render_text()
    # Unchanged, the modules the code imported stay imported.
    kept = (
        "import sys\nold_shop = shop\nprint('servers.shop' in sys.modules, len(shop.list_items()))"
    )
    again = await engine.execute(kept, session=first.session)
    assert (again.status, again.stdout) == ("ok", "True 2\n"), again.render_text()

    def count_items() -> int:
        """How many items are for sale."""
        return 2

    connector = engine.catalog.connector("shop")
    assert isinstance(connector, PythonConnector)
    connector._tools = PythonConnector("shop", [count_items])._tools
    await engine.catalog.refresh("shop")

    added = await engine.execute(
        "import sys\nprint('servers.shop' in sys.modules)\n"
        "from servers import shop\nprint(shop.count_items())",
        session=first.session,
    )
    assert (added.status, added.stdout) == ("ok", "False\n2\n"), added.render_text()
    gone = await engine.execute(
        "from servers import shop\nshop.list_items()", session=first.session, check=False
    )
    assert gone.status == "error", gone.render_text()
    assert "list_items" in gone.render_text()
    # The module object kept from before calls the tool by name: the host refuses it now.
    held = await engine.execute("old_shop.list_items()", session=first.session, check=False)
    assert held.status == "error", held.render_text()
    assert "shop.list_items is not available" in held.render_text(), held.render_text()

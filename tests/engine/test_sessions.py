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

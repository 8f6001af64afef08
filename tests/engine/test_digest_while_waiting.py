"""Through the engine: a large argument's audit digest starts once the call is out (the
catalog's invoker says so), while the tool runs, and not before."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.audit import pending
from codemode.audit.events import argument_digest
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox.inprocess import InProcessSandboxes

pytestmark = pytest.mark.anyio


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []

    def watched(arguments: Any, *, key: bytes | None) -> str:
        names.append(threading.current_thread().name)
        return argument_digest(arguments, key=key)

    monkeypatch.setattr(pending, "argument_digest", watched)
    return names


@pytest.fixture
async def engine(digests: list[str]) -> AsyncIterator[Codemode]:
    seen_while_running: list[list[str]] = []

    def take(text: str) -> int:
        """Count the characters of a text."""
        # The tool runs while the call is out: its digest is under way on its own thread.
        for _ in range(200):
            if digests:
                break
            threading.Event().wait(0.01)
        seen_while_running.append(list(digests))
        return len(text)

    catalog = Catalog([PythonConnector("docs", [take])])
    async with Codemode(
        CodemodeConfig(servers={}), catalog=catalog, sandboxes=InProcessSandboxes(), semantic=False
    ) as engine:
        engine.seen_while_running = seen_while_running  # type: ignore[attr-defined]
        yield engine


async def test_a_large_arguments_digest_runs_while_the_tool_does(
    engine: Codemode, digests: list[str]
) -> None:
    size = pending.EARLY_CHARS + 10
    result = await engine.execute(f"from servers import docs\nprint(docs.take(text='a' * {size}))")
    assert result.status == "ok", result.render_text()
    assert str(size) in result.stdout
    (seen,) = engine.seen_while_running  # type: ignore[attr-defined]
    assert seen and seen[0].startswith("codemode-audit-digest"), seen
    assert len(digests) == 1

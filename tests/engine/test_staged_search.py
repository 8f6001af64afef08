"""The engine answers from each stage of a staged index build as soon as it is ready."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import anyio
import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings
from codemode.search import semantic

pytestmark = pytest.mark.anyio


class Stage:
    """An index whose hits say which stage answered."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def search(self, query: str, limit: int = 5) -> list[Any]:
        hits = self.inner.search(query, limit)
        return [dataclasses.replace(hit, summary=f"{self.name} answered") for hit in hits]

    def __len__(self) -> int:
        return len(self.inner)


def refund_order(order_id: str) -> str:
    """Give a customer their money back for an order."""
    return order_id


async def test_the_prose_stage_answers_before_the_whole_index_is_built(monkeypatch):
    second_stage = threading.Event()
    real_build = semantic.build_index

    def staged_build(specs: Any, *, on_stage: Any = None, **kwargs: Any) -> Any:
        if on_stage is None:  # the keyword index that answers while the build runs
            return real_build(specs, **kwargs)
        lexical = real_build(specs, semantic=False, persist=False)
        on_stage(Stage(lexical, "prose stage"))
        assert second_stage.wait(30), "the test never let the second stage finish"
        return Stage(lexical, "whole index")

    monkeypatch.setattr(semantic, "build_index", staged_build)
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=0))
    catalog = Catalog([PythonConnector("shop", [refund_order])])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as engine:
        await engine.views()
        job = engine.build_search_index()
        with anyio.fail_after(30):
            while True:
                answer = await engine.search("money back for an order")
                if "prose stage answered" in answer.text:
                    break
                assert "lexical (keywords) only" in answer.text  # before the first stage
                await anyio.sleep(0.01)
        second_stage.set()
        with anyio.fail_after(30):
            await job
        answer = await engine.search("money back for an order")
        assert "whole index answered" in answer.text

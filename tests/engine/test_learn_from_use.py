"""Learning from use in the engine: what an owner's code called after a search moves up in
that owner's later searches, and only in that owner's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.config.model import GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings
from codemode.search.owner_usage import OwnerUsage

pytestmark = pytest.mark.anyio

QUERY = "customer record by email"


def crm_tools() -> list[Any]:
    def find_customer_by_email(email: str) -> dict[str, str]:
        """Find a customer record by email address."""
        return {"email": email}

    def customer_record_lookup(email: str) -> dict[str, str]:
        """Look up one customer by their email: the full record."""
        return {"email": email, "full": "yes"}

    def list_invoices(customer: str) -> list[str]:
        """Every invoice of a customer."""
        return []

    return [find_customer_by_email, customer_record_lookup, list_invoices]


async def _engine(learn: bool) -> Codemode:
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=1),
        gateway=GatewaySettings(learn_from_use=learn),
    )
    catalog = Catalog([PythonConnector("crm", crm_tools())])
    return Codemode(config, catalog=catalog, semantic=False, audit=False)


@pytest.fixture
async def engine() -> AsyncIterator[Codemode]:
    async with await _engine(True) as engine:
        yield engine


def _order(answer: Any) -> list[str]:
    return [hit["tool"] for hit in answer.hits]


async def test_the_tool_an_owner_used_after_a_search_rises_for_that_owner_only(engine):
    first = _order(await engine.search(QUERY, owner="alice"))
    assert set(first[:2]) == {"find_customer_by_email", "customer_record_lookup"}
    used = first[1]  # the runner-up is the one that did the job
    code = f"from servers import crm\nfor i in range(3):\n    crm.{used}(email='a@b.example')"
    result = await engine.execute(code, owner="alice")
    assert result.status == "ok", result.render_text()
    assert _order(await engine.search(QUERY, owner="alice"))[0] == used
    # Bob never used it: his answer is the plain ranking.
    assert _order(await engine.search(QUERY, owner="bob")) == first


async def test_failed_calls_teach_nothing_upward_and_without_a_search_nothing_is_learned(engine):
    first = _order(await engine.search(QUERY, owner="carol"))
    failing = f"from servers import crm\ntry:\n    crm.{first[1]}()\nexcept Exception:\n    pass"  # a missing argument: the call fails
    await engine.execute(failing, owner="carol")
    assert _order(await engine.search(QUERY, owner="carol")) == first
    # Dave calls the runner-up without having searched: nothing to learn from.
    await engine.execute(f"from servers import crm\ncrm.{first[1]}(email='x')", owner="dave")
    assert _order(await engine.search(QUERY, owner="dave")) == first


async def test_learning_is_off_when_the_config_says_so():
    async with await _engine(False) as engine:
        first = _order(await engine.search(QUERY, owner="alice"))
        code = f"from servers import crm\nfor i in range(3):\n    crm.{first[1]}(email='a')"
        assert (await engine.execute(code, owner="alice")).status == "ok"
        assert _order(await engine.search(QUERY, owner="alice")) == first
        assert engine.searcher.usage is None


def test_owners_are_bounded_and_old_searches_stop_counting():
    now = [0.0]
    usage = OwnerUsage(max_owners=2, window_s=60.0, clock=lambda: now[0])
    from codemode.search.hit import Hit

    hit = Hit("crm", "lookup", "crm", "lookup", 1.0, "", "lookup()")
    for owner in ("a", "b", "c"):
        usage.searched(owner, "look it up", [hit])
    assert usage.executed("a", {"crm.lookup": {"calls": 1, "failures": 0}}) == 0  # dropped
    assert usage.executed("c", {"crm.lookup": {"calls": 1, "failures": 0}}) == 1
    now[0] = 61.0
    assert usage.executed("c", {"crm.lookup": {"calls": 1, "failures": 0}}) == 0  # too late

"""Two engines sharing a Redis-compatible server: any replica serves any session."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import (
    ApprovalDecidedError,
    ApprovalMismatchError,
    ReplicaLostError,
    SessionBusyError,
    SessionError,
    SessionQuotaError,
    StateStoreError,
    UnknownSessionError,
)
from codemode.gateway.handlers import Caller, GatewayHandlers
from tests.replicas.conftest import Crm, replica_config, stored_bytes

pytestmark = pytest.mark.anyio

WRITE = (
    "import os\n"
    "from state import keep\n"
    "os.makedirs('notes', exist_ok=True)\n"
    "open('notes/todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)
READ = "print(open('notes/todo.txt').read(), totals['pears'])"
ORDER = "from servers import crm\norder = crm.place_order(item='pear')\nprint(order['number'])"


@pytest.mark.parametrize("replicas", ["plain", "encrypted"], indirect=True)
async def test_a_session_started_on_one_replica_continues_on_the_other(
    replicas: tuple[Codemode, Codemode], redis_server: Any, request: pytest.FixtureRequest
) -> None:
    a, b = replicas
    wrote = await a.execute(WRITE)
    assert wrote.status == "ok", wrote.render_text()
    handle = wrote.session
    # The checkpoint B continues from holds the file's text only where there is no key.
    encrypted = request.node.callspec.params["replicas"] == "encrypted"
    assert (b"buy pears" in stored_bytes(redis_server.url)) is not encrypted
    on_b = await b.execute(
        READ + "\ntotals['pears'] += 1\nopen('b.txt', 'w').write('b')", session=handle
    )
    assert (on_b.status, on_b.stdout) == ("ok", "buy pears 3\n"), on_b.render_text()
    assert on_b.session == handle
    assert on_b.restored.files == ["notes/todo.txt"]
    assert on_b.restored.variables == ["totals"]
    # Back on A: its own copy is stale, so it continues from B's checkpoint, not from it.
    back = await a.execute("print(open('b.txt').read(), totals['pears'])", session=handle)
    assert (back.status, back.stdout) == ("ok", "b 4\n"), back.render_text()
    assert back.restored.files == ["b.txt", "notes/todo.txt"]
    # Staying on one replica restores nothing.
    again = await a.execute("print(totals['pears'])", session=handle)
    assert again.stdout == "4\n" and again.restored is None


async def test_a_foreign_or_closed_session_is_unknown_on_every_replica(
    replicas: tuple[Codemode, Codemode],
) -> None:
    a, b = replicas
    mine = await a.execute(WRITE, owner="alice")
    assert mine.session is not None
    with pytest.raises(UnknownSessionError, match="unknown or expired session"):
        await b.execute("print(1)", session=mine.session, owner="mallory")
    moved = await b.execute(
        "print(open('notes/todo.txt').read())", session=mine.session, owner="alice"
    )
    assert moved.stdout == "buy pears\n", moved.render_text()
    # Closed through A (which holds a stale copy): B's copy and the checkpoint go too.
    assert await a.close_session(mine.session)
    for replica in (b, a):
        with pytest.raises(UnknownSessionError):
            await replica.execute("print(1)", session=mine.session, owner="alice")
    assert b.registry is not None and mine.session not in b.registry.handles("alice")


@pytest.mark.parametrize("replicas", ["plain", "encrypted"], indirect=True)
async def test_an_approval_paused_on_a_and_granted_on_b_runs_the_call_once(
    replicas: tuple[Codemode, Codemode], crm: Crm
) -> None:
    a, b = replicas
    paused = await a.execute(ORDER)
    assert paused.status == "approval_required", paused.render_text()
    approval = paused.approval
    # While A holds the paused execution, B must not run the session.
    with pytest.raises(SessionBusyError, match="another gateway replica"):
        await b.execute("print(1)", session=paused.session)
    with pytest.raises(ApprovalMismatchError):
        await b.approve(approval.id, True, digest="sha256:" + "0" * 64)
    assert crm.orders == []
    done = await b.approve(approval.id, True, digest=approval.digest)
    assert (done.status, done.stdout) == ("ok", "1\n"), done.render_text()
    assert done.session == paused.session
    assert crm.orders == [{"item": "pear"}]
    for replica in (a, b):
        with pytest.raises(ApprovalDecidedError, match="already decided"):
            await replica.approve(approval.id, True)
    assert crm.orders == [{"item": "pear"}]
    # The execution is over and its lease given back: B may run the session now.
    after = await b.execute("print('free')", session=paused.session)
    assert after.stdout == "free\n", after.render_text()


async def test_two_replicas_racing_to_approve_decide_once(
    replicas: tuple[Codemode, Codemode], crm: Crm
) -> None:
    a, b = replicas
    paused = await a.execute(ORDER)
    approval_id = paused.approval.id
    answers = await asyncio.gather(
        a.approve(approval_id, True), b.approve(approval_id, True), return_exceptions=True
    )
    decided = [answer for answer in answers if isinstance(answer, ApprovalDecidedError)]
    finished = [answer for answer in answers if not isinstance(answer, BaseException)]
    assert len(decided) == 1 and len(finished) == 1, answers
    assert finished[0].stdout == "1\n"
    assert crm.orders == [{"item": "pear"}]


async def test_a_denial_on_b_resumes_the_execution_on_a_without_the_call(
    replicas: tuple[Codemode, Codemode], crm: Crm
) -> None:
    a, b = replicas
    paused = await a.execute(
        "from servers import crm\ntry:\n    crm.place_order(item='x')\n"
        "except Exception as error:\n    print('refused:', type(error).__name__)"
    )
    denied = await b.approve(paused.approval.id, False)
    assert denied.stdout.startswith("refused:"), denied.render_text()
    assert crm.orders == []


@pytest.mark.parametrize("replicas", ["plain", "encrypted"], indirect=True)
async def test_tokens_minted_through_one_replica_resolve_through_the_other(
    replicas: tuple[Codemode, Codemode],
    crm: Crm,
    redis_server: Any,
    request: pytest.FixtureRequest,
) -> None:
    a, b = replicas
    got = await a.execute("from servers import crm\nc = crm.customer()\nprint(c['email'])")
    assert got.status == "ok", got.render_text()
    token = got.stdout.strip()
    assert token.startswith("<EMAIL_") and "ada" not in got.stdout
    # The value is in the shared store in plain text without a key, nowhere with one.
    encrypted = request.node.callspec.params["replicas"] == "encrypted"
    stored = stored_bytes(redis_server.url)
    assert (b"ada.lovelace@example.com" in stored) is not encrypted
    assert (b"lovelace" in stored) is not encrypted
    sent = await b.execute(
        f"from servers import crm\nprint(crm.send_mail(to={token!r}))", session=got.session
    )
    assert sent.stdout == "sent\n", sent.render_text()
    assert crm.mails == ["ada.lovelace@example.com"]
    # B's vault holds the same token for the same value (no second token is minted).
    again = await b.execute(
        "from servers import crm\nprint(crm.customer()['email'])", session=got.session
    )
    assert again.stdout.strip() == token


async def test_every_replica_appends_to_one_chained_audit_log(
    replicas: tuple[Codemode, Codemode],
) -> None:
    a, b = replicas
    first = await a.execute("from servers import crm\ncrm.customer()")
    await b.execute(
        "from servers import crm\ncrm.send_mail(to='x@example.org')", session=first.session
    )
    assert a.audit_log is not None and b.audit_log is not None
    tools = [event.tool for event in b.audit_log.query()]
    assert tools == ["customer", "send_mail"]
    assert a.shared is not None
    assert a.shared.audit_log.verify() == 2


async def test_an_approval_whose_holder_died_is_answered_replica_lost(
    replicas: tuple[Codemode, Codemode], crm: Crm
) -> None:
    a, b = replicas
    paused = await a.execute(ORDER)
    assert a.shared is not None
    a.shared.link.close()  # A stops answering the others (its heartbeat ends at once)
    with pytest.raises(ReplicaLostError, match="the call did not run"):
        await b.approve(paused.approval.id, True)
    assert crm.orders == []


async def test_an_approval_that_lapsed_is_no_longer_pending_anywhere(
    replicas: tuple[Codemode, Codemode],
) -> None:
    a, b = replicas
    paused = await a.execute(ORDER)
    assert paused.session is not None
    assert await a.close_session(paused.session)  # the paused call is refused, not run
    with pytest.raises(SessionError, match="no longer pending"):
        await b.approve(paused.approval.id, True)


def _make_idle(engine: Codemode, handle: str) -> list[str]:
    """Expire ``handle`` on ``engine`` as if it had been idle for hours."""
    registry = engine.registry
    assert registry is not None
    # Relative to now: the monotonic clock starts near zero on a machine booted recently.
    registry.get(handle, None).last_used = time.monotonic() - registry.idle_timeout_s - 1
    return registry.expire_idle()


async def test_idle_expiry_drops_a_stale_copy_but_forgets_a_session_where_it_ran_last(
    replicas: tuple[Codemode, Codemode],
) -> None:
    a, b = replicas
    wrote = await a.execute(WRITE)
    handle = wrote.session
    assert handle is not None
    await b.execute("print(1)", session=handle)
    # A's copy is stale (B ran the session since): expiring it there keeps the session.
    assert _make_idle(a, handle) == [handle]
    on_b = await b.execute(READ, session=handle)
    assert on_b.stdout == "buy pears 3\n" and on_b.restored is None, on_b.render_text()
    # B ran it last: idle there means idle everywhere, so it is forgotten on every replica.
    assert _make_idle(b, handle) == [handle]
    for replica in (a, b):
        with pytest.raises(UnknownSessionError):
            await replica.execute(READ, session=handle)


async def test_a_store_outage_is_a_clear_error_and_replicas_recover_after_it(
    replicas: tuple[Codemode, Codemode], redis_server: Any
) -> None:
    a, _ = replicas
    before = await a.execute("x = 1")
    redis_server.stop()
    with pytest.raises(StateStoreError, match=r"shared store at .* did not answer"):
        await a.execute("print(x)", session=before.session)
    redis_server.start()  # an empty server: what it held is gone, the replica goes on
    after = await a.execute("print(2)")
    assert (after.status, after.stdout) == ("ok", "2\n"), after.render_text()


class ClaimsToReattach:
    """A twin of a provider whose sandboxes every replica reaches by name (a cluster
    backend): it says no restore is needed, and records who asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def restore_needed(self, handle: str, previous: str) -> bool:
        self.asked.append((handle, previous))
        return False


async def test_a_provider_that_reattaches_is_asked_instead_of_restoring(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    twin = ClaimsToReattach()
    engines = [
        Codemode(
            replica_config(tmp_path, name, redis_server.url),
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for name in ("a", "b")
    ]
    engines[1].handover = twin
    async with engines[0] as a, engines[1] as b:
        wrote = await a.execute(WRITE)
        moved = await b.execute("import os\nprint(os.path.exists('notes'))", session=wrote.session)
        assert a.shared is not None
        assert twin.asked == [(wrote.session, a.shared.replica)]
        # Nothing was restored: a real reattaching provider would hand back the same sandbox.
        assert moved.stdout == "False\n" and moved.restored is None, moved.render_text()


async def test_a_handle_less_call_gets_its_own_session_that_continues_on_every_replica(
    replicas: tuple[Codemode, Codemode],
) -> None:
    """Behaviour changed (issue 26): an identified 2026-era client's calls without a handle
    no longer share one default session; the handle in the result continues it anywhere."""
    a, b = replicas
    caller = Caller(owner="alice", client="alice")
    kept = "from state import keep\nx = 41\nkeep('x')"
    first = await GatewayHandlers(a).execute({"code": kept}, caller)
    apart = await GatewayHandlers(b).execute({"code": "print('x' in dir())"}, caller)
    assert first.structured_content is not None and apart.structured_content is not None
    assert apart.structured_content.get("stdout") == "False\n", apart.structured_content
    assert apart.structured_content["session"] != first.structured_content["session"]
    handle = first.structured_content["session"]
    second = await GatewayHandlers(b).execute({"code": "print(x + 1)", "session": handle}, caller)
    assert second.structured_content is not None
    assert second.structured_content.get("stdout") == "42\n", second.structured_content
    assert second.structured_content["session"] == handle


async def test_a_full_replica_releases_its_least_recently_used_idle_session_for_room(
    redis_server: Any, crm: Crm, tmp_path: Path
) -> None:
    """``max_sessions`` bounds the sandboxes one replica holds, as on a lone gateway; a session
    released there for room continues on any replica from its checkpoint."""
    config = replica_config(tmp_path, "a", redis_server.url)
    small = config.gateway.model_copy(update={"max_sessions": 1, "max_stored_sessions": 2})
    engines = [
        Codemode(
            made,
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for made in (
            config.model_copy(update={"gateway": small}),
            replica_config(tmp_path, "b", redis_server.url),
        )
    ]
    async with engines[0] as a, engines[1] as b:
        first = await a.execute(WRITE)
        second = await a.execute("from state import keep\nx = 2\nkeep('x')")
        assert second.status == "ok", second.render_text()
        assert a.session_states(None) == {first.session: "released", second.session: "idle"}
        on_b = await b.execute(READ, session=first.session)
        assert on_b.stdout == "buy pears 3\n", on_b.render_text()
        # Back on A (its copy is stale): restored there, pushing the second session out.
        back = await a.execute(READ, session=first.session)
        assert back.stdout == "buy pears 3\n" and back.restored.variables
        assert a.session_states(None) == {first.session: "idle", second.session: "released"}
        kept = await a.execute("print(x)", session=second.session)
        assert kept.stdout == "2\n", kept.render_text()
        # Released copies still count against the replica's max_stored_sessions.
        with pytest.raises(SessionQuotaError, match="this replica keeps 2 sessions"):
            await a.execute("print('third')")

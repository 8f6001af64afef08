"""Both halves of scaling out at once: two gateway replicas sharing a Redis-compatible server,
their sandboxes on the Ray worker nodes of the test cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.cluster.provider import RaySandboxes
from codemode.cluster.session import RemoteSession, remote_guest
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.errors import ApprovalDecidedError, SessionBusyError
from codemode.policy import PolicySettings
from codemode.settings.sandbox import SandboxSettings
from tests.cluster.conftest import LocalRayCluster
from tests.replicas.conftest import ASK_ORDERS, Crm

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

WRITE = (
    "from state import keep\n"
    "open('todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)
ORDER = "from servers import crm\norder = crm.place_order(item='pear')\nprint(order['number'])"


def _config(
    cluster: LocalRayCluster, sandbox: SandboxSettings, state: Path, store: str
) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=sandbox,
        cluster=cluster.settings(),
        gateway=GatewaySettings(state_dir=state, shared_store=store, session_lease_s=3.0),
        policy=PolicySettings.model_validate(ASK_ORDERS),
    )


@pytest.fixture
def crm() -> Crm:
    return Crm()


@pytest.fixture
async def replicas(
    ray_cluster: LocalRayCluster,
    sandbox_settings: SandboxSettings,
    redis_server: Any,
    crm: Crm,
    tmp_path: Path,
) -> AsyncIterator[tuple[Codemode, Codemode]]:
    """Replicas A and B: one shared store, one cluster, each its own cluster provider."""
    engines = [
        Codemode(
            _config(ray_cluster, sandbox_settings, tmp_path / name, redis_server.url),
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for name in ("a", "b")
    ]
    async with engines[0] as a, engines[1] as b:
        yield a, b


def _node_of(engine: Codemode, handle: str | None) -> str:
    """The worker node running ``engine``'s sandbox of session ``handle``."""
    assert isinstance(engine.sandboxes, RaySandboxes) and engine.registry is not None
    assert handle is not None
    session: Any = engine.registry.get(handle, None).sandbox
    session = getattr(session, "inner", session)  # under the checkpoint keeper
    assert isinstance(session, RemoteSession) and session.sandbox is not None
    assert session.sandbox.guest_pid is None  # no process of it on the gateway
    return str(remote_guest(session.sandbox).node)


async def test_a_session_moves_between_replicas_while_its_sandboxes_run_on_the_nodes(
    replicas: tuple[Codemode, Codemode], ray_cluster: LocalRayCluster
) -> None:
    a, b = replicas
    nodes = set(ray_cluster.node_ids())
    wrote = await a.execute(WRITE)
    assert wrote.status == "ok", wrote.render_text()
    assert _node_of(a, wrote.session) in nodes
    on_b = await b.execute(
        "print(open('todo.txt').read(), totals['pears'])\ntotals['pears'] += 1\n"
        "open('b.txt', 'w').write('b')",
        session=wrote.session,
    )
    assert (on_b.status, on_b.stdout) == ("ok", "buy pears 3\n"), on_b.render_text()
    restored = on_b.restored
    assert (restored.files, restored.variables) == (["todo.txt"], ["totals"])
    assert _node_of(b, wrote.session) in nodes
    back = await a.execute("print(open('b.txt').read(), totals['pears'])", session=wrote.session)
    assert (back.status, back.stdout) == ("ok", "b 4\n"), back.render_text()
    assert _node_of(a, wrote.session) in nodes


async def test_an_approval_paused_on_a_and_granted_on_b_runs_the_call_once(
    replicas: tuple[Codemode, Codemode], crm: Crm, ray_cluster: LocalRayCluster
) -> None:
    a, b = replicas
    paused = await a.execute(ORDER)
    assert paused.status == "approval_required", paused.render_text()
    assert _node_of(a, paused.session) in ray_cluster.node_ids()
    approval = paused.approval
    with pytest.raises(SessionBusyError, match="another gateway replica"):
        await b.execute("print(1)", session=paused.session)
    assert crm.orders == []
    done = await b.approve(approval.id, True, digest=approval.digest)
    assert (done.status, done.stdout) == ("ok", "1\n"), done.render_text()
    for replica in (a, b):
        with pytest.raises(ApprovalDecidedError, match="already decided"):
            await replica.approve(approval.id, True)
    assert crm.orders == [{"item": "pear"}]
    after = await b.execute("print('free')", session=paused.session)
    assert (after.status, after.stdout) == ("ok", "free\n"), after.render_text()
    assert _node_of(b, paused.session) in ray_cluster.node_ids()

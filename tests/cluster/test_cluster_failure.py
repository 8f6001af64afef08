"""Capacity and failure on a real cluster: a full cluster says "busy", a killed worker node
gives its sessions ``session_lost`` within 5 s (never a hang), other sessions carry on."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from codemode.catalog.catalog import Catalog
from codemode.cluster.provider import RaySandboxes
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.errors import ClusterBusyError
from codemode.settings.sandbox import SandboxSettings
from tests.cluster.conftest import Borrowed, LocalRayCluster, Node

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

DOOMED = "codemode_doomed"  # a slot only the nodes of this test offer

WRITE = (
    "from state import keep\n"
    "open('todo.txt', 'w').write('buy pears')\n"
    "totals = {'pears': 3}\n"
    "keep('totals')\n"
)
READ = "print(open('todo.txt').read(), totals['pears'])"


@pytest.fixture
def doomed(ray_cluster: LocalRayCluster) -> Iterator[Node]:
    node = ray_cluster.add_worker("doomed", {DOOMED: 2})
    yield node
    node.kill()


@pytest.fixture
def doomed_sandboxes(
    doomed: Node, ray_cluster: LocalRayCluster, sandbox_settings: SandboxSettings
) -> Iterator[RaySandboxes]:
    settings = ray_cluster.settings(slot_resource=DOOMED, busy_retry_after_s=3.0)
    sandboxes = RaySandboxes(settings, sandbox_settings)
    yield sandboxes
    sandboxes.close()


@pytest.fixture
async def engine(
    doomed_sandboxes: RaySandboxes, sandbox_settings: SandboxSettings, tmp_path: Path
) -> AsyncIterator[Codemode]:
    """An engine with session checkpoints (the embedded state store) on the doomed node."""
    config = CodemodeConfig(
        servers={}, sandbox=sandbox_settings, gateway=GatewaySettings(state_dir=tmp_path)
    )
    sandboxes = Borrowed(doomed_sandboxes)
    async with Codemode(
        config, catalog=Catalog([]), sandboxes=sandboxes, semantic=False, audit=False
    ) as codemode:
        yield codemode


async def test_a_full_cluster_answers_busy_and_a_killed_node_loses_its_sessions(
    doomed: Node,
    doomed_sandboxes: RaySandboxes,
    ray_sandboxes: RaySandboxes,
    engine: Codemode,
):
    kept = await engine.execute(WRITE)  # idle on the doomed node, with a checkpoint
    assert kept.status == "ok", kept.to_dict()
    running = doomed_sandboxes.open("running")
    bystander = ray_sandboxes.open("bystander")  # on the ordinary worker nodes
    try:
        assert running.execute("x = 1").status == "ok"
        assert bystander.execute("z = 3").status == "ok"

        # Both slots of the node are taken: admission control, not a queue.
        with pytest.raises(ClusterBusyError, match=r"busy, retry after 3 s") as busy:
            doomed_sandboxes.open("third").execute("pass")
        assert busy.value.retry_after_s == 3

        killed_at: list[float] = []

        def kill_when_running(stream: str, data: bytes) -> None:
            if b"running" in data and not killed_at:
                killed_at.append(time.monotonic())
                threading.Thread(target=doomed.kill, daemon=True).start()

        code = "import time\nprint('running', flush=True)\ntime.sleep(60)"
        lost = running.execute(code, timeout_s=30, on_output=kill_when_running)
        answered_at = time.monotonic()
        assert lost.status == "session_lost", lost.to_dict()
        assert lost.stdout == "running\n"  # what ran before the loss is kept
        assert lost.sandbox_reset and "node" in lost.hint
        assert answered_at - killed_at[0] < 5

        # The idle session on the same node is told too, before anything runs.
        told = await engine.execute(READ, session=kept.session)
        assert told.status == "session_lost", told.to_dict()

        # Other sessions are unaffected.
        assert bystander.execute("print(z)").stdout == "3\n"
    finally:
        for session in (running, bystander):
            session.close()

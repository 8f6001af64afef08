"""Capacity and failure on a real cluster: a full cluster says "busy", a killed worker node
gives its sessions ``session_lost`` within 5 s (never a hang), other sessions carry on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from codemode.cluster.provider import RaySandboxes
from codemode.errors import ClusterBusyError
from codemode.sandbox.settings import SandboxSettings
from tests.cluster.conftest import LocalRayCluster, Node

pytestmark = pytest.mark.slow

DOOMED = "codemode_doomed"  # a slot only the node this test kills offers


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


def test_a_full_cluster_answers_busy_and_a_killed_node_loses_its_sessions(
    doomed: Node, doomed_sandboxes: RaySandboxes, ray_sandboxes: RaySandboxes
):
    running = doomed_sandboxes.open("running")
    idle = doomed_sandboxes.open("idle")
    bystander = ray_sandboxes.open("bystander")  # on the ordinary worker nodes
    try:
        assert running.execute("x = 1").status == "ok"
        assert idle.execute("y = 2").status == "ok"
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
        told = idle.execute("print(y)")
        assert told.status == "session_lost", told.to_dict()

        # Other sessions are unaffected.
        assert bystander.execute("print(z)").stdout == "3\n"
    finally:
        for session in (running, idle, bystander):
            session.close()

"""What the cluster says when it cannot place a sandbox: no live worker node, agents that fail
or a head that does not answer are clear ``ClusterError``s (one line per node, not Ray's RPC
text), and only a cluster whose nodes are all full answers "busy". Ray's calls are scripted
here; the real cluster's busy and lost nodes are in test_cluster_failure.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import ray

from codemode.cluster import provider
from codemode.cluster.provider import RaySandboxes
from codemode.errors import ClusterBusyError, ClusterError
from codemode.settings.cluster import ClusterSettings
from codemode.settings.sandbox import SandboxSettings

RPC_FAILURE = (
    "Failed to connect to GCS within 60 seconds. GCS may have been killed.\n"
    '  File "python/ray/_raylet.pyx", line 1848, in ray._raylet.execute_task\n'
    "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with: "
    "status = StatusCode.UNAVAILABLE ...>"
)


class Ref:
    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error


class Method:
    def __init__(self, result: Ref) -> None:
        self.result = result

    def remote(self, *args: Any) -> Ref:
        return self.result


class Agent:
    def __init__(self, load: Ref, lease: Ref) -> None:
        self.load, self.lease = Method(load), Method(lease)


def node(index: int, *, alive: bool = True, slots: int = 2) -> dict[str, Any]:
    resources = {"CPU": 2.0} | ({"codemode_sandbox": float(slots)} if slots else {})
    return {
        "NodeID": f"node{index:02d}" + "0" * 20,
        "NodeManagerAddress": "127.0.0.1",
        "Alive": alive,
        "Resources": resources,
    }


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch):
    def build(nodes: Any, agents: list[Agent]) -> RaySandboxes:
        def listing() -> list[dict[str, Any]]:
            if isinstance(nodes, BaseException):
                raise nodes
            return nodes

        def get(ref: Ref, timeout: float | None = None) -> Any:
            if ref.error is not None:
                raise ref.error
            return ref.value

        handed = iter(agents)
        monkeypatch.setattr(ray, "nodes", listing)
        monkeypatch.setattr(ray, "wait", lambda refs, **kw: (list(refs), []))
        monkeypatch.setattr(ray, "get", get)
        monkeypatch.setattr(provider, "node_agent", lambda *a, **kw: next(handed))
        sandboxes = object.__new__(RaySandboxes)
        sandboxes.cluster = ClusterSettings(address="ray://head:10001", busy_retry_after_s=3)
        sandboxes.sandbox = SandboxSettings()
        sandboxes._settings = {}
        sandboxes._lock = threading.Lock()
        sandboxes._agents = {}
        sandboxes._live = set()
        sandboxes._closed = False
        sandboxes.agent_errors = []
        return sandboxes

    return build


def test_no_live_worker_node_says_so_and_how_to_start_one(cluster) -> None:
    sandboxes = cluster([node(0, slots=0), node(1, alive=False)], [])
    with pytest.raises(ClusterError) as caught:
        sandboxes.place()
    error = caught.value
    assert not isinstance(error, ClusterBusyError)
    assert "no live worker node offers sandbox slots" in error.message
    assert "1 live node(s) without slots, 1 dead" in error.message
    assert "ray start --address HEAD:6379" in (error.fix or "")


def test_agents_that_fail_are_one_line_each_not_rpc_text(cluster) -> None:
    failing = Agent(Ref(error=ConnectionError(RPC_FAILURE)), Ref())
    sandboxes = cluster([node(0)], [failing])
    with pytest.raises(ClusterError) as caught:
        sandboxes.place()
    error = caught.value
    assert not isinstance(error, ClusterBusyError)
    assert "node00000000: ConnectionError: Failed to connect to GCS" in error.message
    assert "_raylet.pyx" not in error.message and "StatusCode" not in error.message


def test_leases_that_all_fail_are_not_busy(cluster) -> None:
    load = Ref({"slots": 2, "leased": 0})
    broken = Agent(load, Ref(error=RuntimeError("the node agent crashed\ntraceback...")))
    sandboxes = cluster([node(0)], [broken])
    with pytest.raises(
        ClusterError, match="node00000000: RuntimeError: the node agent crashed \\(fix"
    ):
        sandboxes.place()


def test_a_head_that_does_not_answer_is_a_clear_error(cluster) -> None:
    sandboxes = cluster(ConnectionError(RPC_FAILURE), [])
    with pytest.raises(ClusterError, match=r"the Ray cluster at ray://head:10001 does not answer"):
        sandboxes.place()


def test_only_nodes_that_are_all_full_answer_busy(cluster) -> None:
    full = Agent(Ref({"slots": 2, "leased": 2}), Ref())
    sandboxes = cluster([node(0)], [full])
    with pytest.raises(ClusterBusyError, match="busy, retry after 3 s"):
        sandboxes.place()

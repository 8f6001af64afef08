"""A real Ray cluster on 127.0.0.1 for the cluster tests: a head and two worker nodes.

Every node is a ``ray start --block`` process group of its own, started with a minimal
environment (nothing of this process, where tests put credentials), and killed as a group:
always torn down, every wait bounded. The head offers no sandbox slots, so sandboxes land on
the workers. One cluster serves the whole test session; a test that kills a node adds a node
of its own (``add_worker``). Ray advertises the machine's own address even when told
``--node-ip-address 127.0.0.1``, so the gateway is told to reach sandboxes on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import ray

import codemode
from codemode.cluster.provider import RaySandboxes
from codemode.cluster.session import RemoteSession
from codemode.settings.cluster import ClusterSettings
from codemode.settings.sandbox import Limits, SandboxSettings

SRC = Path(codemode.__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
SLOT = "codemode_sandbox"
_START_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s:g} s")
        time.sleep(0.05)


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def descendants(root: int) -> list[int]:
    found: list[int] = []
    pending = [root]
    while pending:
        pid = pending.pop()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(c) for c in (task / "children").read_text().split()]
                found.extend(children)
                pending.extend(children)
    return found


@dataclass
class Node:
    name: str
    process: subprocess.Popen[bytes]
    resources: dict[str, int]

    def pids(self) -> list[int]:
        """Every process of the node: raylet, workers, agents, their sandboxes."""
        return [self.process.pid, *descendants(self.process.pid)]

    def kill(self) -> None:
        """What losing the machine does: SIGKILL every process of the node at once."""
        doomed = self.pids()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


@dataclass
class LocalRayCluster:
    root: Path
    gcs_port: int
    client_port: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def client_address(self) -> str:
        return f"ray://127.0.0.1:{self.client_port}"

    def settings(self, **changes: object) -> ClusterSettings:
        return ClusterSettings(address=self.address, stream_host="127.0.0.1", **changes)  # type: ignore[arg-type]

    def env(self) -> dict[str, str]:
        """What a node's processes start with: nothing from the gateway's environment."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root / "home"),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(SRC),
            "RAY_USAGE_STATS_ENABLED": "0",
            # A Ray Client session starts a server process: slow on a loaded machine.
            "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "120",
        }

    def _start(self, name: str, args: list[str], resources: dict[str, int]) -> Node:
        log = (self.root / f"{name}.log").open("wb")
        ports = [
            "--node-manager-port", str(free_port()),
            "--object-manager-port", str(free_port()),
            "--dashboard-agent-listen-port", str(free_port()),
            "--dashboard-agent-grpc-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
        ]  # fmt: skip
        command = [RAY, "start", "--block", "--disable-usage-stats", *ports, *args]
        command += ["--node-ip-address", "127.0.0.1", "--resources", json.dumps(resources)]
        process = subprocess.Popen(
            command,
            env=self.env(),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        node = Node(name, process, resources)
        self.nodes.append(node)
        return node

    def start_head(self) -> None:
        args = ["--head", "--port", str(self.gcs_port), "--num-cpus", "0"]
        args += ["--ray-client-server-port", str(self.client_port), "--include-dashboard", "false"]
        args += ["--dashboard-port", str(free_port()), "--temp-dir", str(self.root / "ray")]
        head = self._start("head", args, {})

        def listening() -> bool:
            if head.process.poll() is not None:  # a start that failed says why at once
                tail = (self.root / "head.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ray start --head exited ({head.process.returncode}):\n{tail}")
            return _port_open(self.gcs_port)

        wait_for(listening, _START_TIMEOUT_S, "the Ray head starting")

    def add_worker(self, name: str, resources: dict[str, int] | None = None) -> Node:
        """Start a worker node and wait until the cluster lists it."""
        resources = resources or {SLOT: 3}
        node = self._start(name, ["--address", self.address, "--num-cpus", "1"], resources)
        slot = next(iter(resources))

        def registered() -> bool:
            alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get(slot)]
            return len(alive) >= sum(1 for n in self.nodes if slot in n.resources)

        wait_for(registered, _START_TIMEOUT_S, f"worker node {name} joining")
        return node

    def node_ids(self, slot: str = SLOT) -> list[str]:
        return [str(n["NodeID"]) for n in ray.nodes() if n["Alive"] and n["Resources"].get(slot)]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()


@contextlib.contextmanager
def running_cluster(slots: dict[str, int] | None = None) -> Iterator[LocalRayCluster]:
    """A head and two worker nodes on 127.0.0.1 (each offering ``slots``); this process is the
    gateway, connected as a driver. Always torn down."""
    root = Path(tempfile.mkdtemp(prefix="cmray-"))
    (root / "home").mkdir()
    cluster = LocalRayCluster(root, free_port(), free_port())
    try:
        cluster.start_head()
        ray.init(
            address=cluster.address,
            namespace="codemode",
            log_to_driver=False,
            logging_level="WARNING",
        )
        cluster.add_worker("worker-1", slots)
        cluster.add_worker("worker-2", slots)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


_RUNNING: list[contextlib.ExitStack] = []


def _stop_clusters() -> None:
    while _RUNNING:
        _RUNNING.pop().close()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """One cluster for every test of this directory, stopped as soon as they are done: its
    nodes are children of this process, and later tests count this process's sandboxes."""
    stack = contextlib.ExitStack()
    _RUNNING.append(stack)
    yield stack.enter_context(running_cluster())
    _stop_clusters()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    here = Path(__file__).parent
    if nextitem is None or here not in Path(nextitem.path).parents:
        _stop_clusters()


@pytest.fixture(scope="session")
def sandbox_settings() -> SandboxSettings:
    return SandboxSettings(limits=Limits(wall_time_s=10, memory_bytes=512 << 20), pool_size=0)


@pytest.fixture(scope="session")
def ray_sandboxes(
    ray_cluster: LocalRayCluster, sandbox_settings: SandboxSettings
) -> Iterator[RaySandboxes]:
    """The remote backend over the two worker nodes, shared by the tests of a run."""
    sandboxes = RaySandboxes(ray_cluster.settings(), sandbox_settings)
    yield sandboxes
    sandboxes.close()


class Borrowed:
    """A session-wide provider lent to one engine: its close ends only the sessions it
    opened, not the provider."""

    has_workspace = True
    isolated = True

    def __init__(self, inner: RaySandboxes) -> None:
        self.inner = inner
        self.opened: list[RemoteSession] = []

    def open(self, session_id: str) -> RemoteSession:
        session = self.inner.open(session_id)
        self.opened.append(session)
        return session

    def expect(self) -> None:
        self.inner.expect()

    def close(self) -> None:
        for session in self.opened:
            session.close()

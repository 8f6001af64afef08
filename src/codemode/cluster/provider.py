"""``RaySandboxes``: a ``SandboxProvider`` whose sandboxes run on a Ray cluster's worker nodes.

Every worker node that offers sandbox slots (the custom resource ``[cluster] slot_resource``)
runs one node agent (``codemode.cluster.agent``) with a warm pool. A new session's sandbox is
leased from the least loaded agent with a free slot, and the gateway connects to it with the
lease's token; the runner then serves it here like a local one. Only sandbox settings (limits)
travel to the worker: never credentials, upstream configuration or the gateway's environment.
A full cluster answers ``ClusterBusyError`` ("busy, retry after N s") at once; a cluster with no
live worker node, or whose nodes' agents all fail, answers a ``ClusterError`` that says so
(never "busy", never Ray's own RPC text alone).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from codemode.cluster.actor import node_agent
from codemode.cluster.placement import NodeLoad, choose_node
from codemode.cluster.remote import RemoteGuest, StreamLink
from codemode.cluster.session import RemoteSession, remote_guest
from codemode.errors import ClusterBusyError, ClusterError, ConfigError, SandboxError
from codemode.sandbox.runner import Sandbox
from codemode.settings.cluster import ClusterSettings
from codemode.settings.sandbox import SandboxSettings

__all__ = ["RaySandboxes", "connect"]

log = logging.getLogger(__name__)


# Ray Client's proxier starts a server per driver; on a loaded head that start can time out
# (seen in the test suite beside other work) while a second try succeeds.
_TRANSIENT = ("Starting Ray client server failed", "Initialization failure from server")
_ATTEMPTS = 3
_START_WORKER = (
    "start a worker node: `ray start --address HEAD:6379 --resources "
    "'{\"codemode_sandbox\": 16}'` (bubblewrap must work there: `codemode doctor`)"
)


def describe_error(error: BaseException) -> str:
    """One line for a Ray failure: its kind and first line (Ray's text runs to a traceback)."""
    cause = getattr(error, "cause", None) or error
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    first = lines[0][:200] if lines else ""
    return f"{type(cause).__name__}: {first}" if first else type(cause).__name__


def connect(settings: ClusterSettings) -> None:
    """Join the cluster at ``settings.address`` as a driver (idempotent). A Ray Client address
    whose server fails to start is tried again, up to three times in all."""
    import ray

    if ray.is_initialized():
        return
    address = settings.address
    if not address:
        raise ClusterError(
            "no cluster address is configured",
            fix='set [cluster] address = "ray://HOST:10001" or pass --cluster ray://HOST:PORT',
        )
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            ray.init(
                address=address,
                namespace=settings.namespace,
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
            return
        except Exception as error:  # Ray raises many kinds; all mean "cannot join"
            transient = address.startswith("ray://") and any(m in str(error) for m in _TRANSIENT)
            if not transient or attempt == _ATTEMPTS:
                raise ClusterError(
                    f"could not join the Ray cluster at {address}: {error}",
                    fix="check that the head runs (`ray start --head`) and the address and port "
                    "are right (ray://HOST:10001 for Ray Client, HOST:6379 from a machine in "
                    "the cluster)",
                ) from error
            log.warning(
                "the Ray cluster at %s did not start a client server for us (try %d of %d); "
                "trying again",
                address,
                attempt,
                _ATTEMPTS,
            )
            with contextlib.suppress(Exception):
                ray.shutdown()
            time.sleep(attempt)


class RaySandboxes:
    """Sessions' sandboxes on the cluster. ``open`` is cheap; a sandbox is placed on first use."""

    # Files are listed and read by the sandbox's own code, which works on any node.
    has_workspace = True

    def __init__(self, cluster: ClusterSettings, sandbox: SandboxSettings) -> None:
        if sandbox.network.allow:
            raise ConfigError(
                "[sandbox.network] allow is not supported with a sandbox cluster yet: worker "
                "nodes run no egress proxy, so the code would have no network",
                fix="remove [sandbox.network] allow, or serve without [cluster] address",
            )
        self.cluster = cluster
        self.sandbox = sandbox
        self._settings = sandbox.model_dump(mode="json")
        self._lock = threading.Lock()
        self._agents: dict[str, Any] = {}
        self._live: set[Sandbox] = set()
        self._closed = False
        # Why nodes were left out of the last placement (their agents failed).
        self.agent_errors: list[str] = []
        connect(cluster)

    @property
    def isolated(self) -> bool:
        """Workers start isolated guests (a worker that did not is refused at lease)."""
        return not self.sandbox.unsafe_no_isolation

    def open(self, session_id: str) -> RemoteSession:
        return RemoteSession(self.place, session_id, self.fresh_from)

    def expect(self) -> None:
        """Nothing: the nodes' agents keep their guests started ahead themselves
        (``[cluster] warm_per_node``), whatever this gateway hears."""

    def _agent(self, node: dict[str, Any], slots: int) -> Any:
        node_id = str(node["NodeID"])
        with self._lock:
            agent = self._agents.get(node_id)
        if agent is None:
            bind_host = self.cluster.stream_host or str(node["NodeManagerAddress"])
            agent = node_agent(
                node_id, cluster=self.cluster, sandbox=self._settings, slots=slots,
                bind_host=bind_host,
            )  # fmt: skip
            with self._lock:
                agent = self._agents.setdefault(node_id, agent)
        return agent

    def nodes(self) -> list[tuple[NodeLoad, Any]]:
        """Alive nodes that offer sandbox slots, with their agents and what is leased there
        (by every gateway). A node whose agent does not answer in time is left out."""
        import ray

        found: list[tuple[str, str, Any]] = []
        listing: Any = ray.nodes
        try:
            nodes = listing()
        except Exception as error:
            raise self._unreachable(error) from error
        for node in nodes:
            slots = int(node.get("Resources", {}).get(self.cluster.slot_resource, 0))
            if node.get("Alive") and slots > 0:
                agent = self._agent(node, slots)
                found.append((str(node["NodeID"]), str(node["NodeManagerAddress"]), agent))
        self.agent_errors = []
        if not found:
            raise self._no_workers(nodes)
        try:
            asked = {node_id: agent.load.remote() for node_id, _, agent in found}
            timeout = self.cluster.start_timeout_s
            ready, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=timeout)
        except Exception as error:
            raise self._unreachable(error) from error
        done = set(ready)
        loads: list[tuple[NodeLoad, Any]] = []
        for node_id, address, agent in found:
            if asked[node_id] not in done:
                self.agent_errors.append(f"{node_id[:12]}: no answer in {timeout:g} s")
                continue
            try:
                load = ray.get(asked[node_id], timeout=self.cluster.control_timeout_s)
            except Exception as error:  # noqa: BLE001 - a lost agent: forget it, skip the node
                log.warning("the node agent on %s did not answer: %s", node_id, error)
                with self._lock:
                    self._agents.pop(node_id, None)
                self.agent_errors.append(f"{node_id[:12]}: {describe_error(error)}")
                continue
            loads.append((NodeLoad(node_id, address, load["slots"], load["leased"]), agent))
        return loads

    def place(self) -> Sandbox:
        """Lease a sandbox from the least loaded node with a free slot and connect to it."""
        import ray

        with self._lock:
            if self._closed:
                raise SandboxError("the cluster provider is closed", fix="start a new engine")
        candidates = {load.node_id: (load, agent) for load, agent in self.nodes()}
        failures = list(self.agent_errors)
        full = (
            len(candidates) > 0 and choose_node([load for load, _ in candidates.values()]) is None
        )
        while (chosen := choose_node([load for load, _ in candidates.values()])) is not None:
            _, agent = candidates.pop(chosen.node_id)
            try:
                endpoint = ray.get(
                    agent.lease.remote(self._settings), timeout=self.cluster.start_timeout_s
                )
            except Exception as error:  # noqa: BLE001 - try the next node
                log.warning("node %s could not lease a sandbox: %s", chosen.node_id, error)
                failures.append(f"{chosen.node_id[:12]}: {describe_error(error)}")
                continue
            if endpoint is not None:  # None: another gateway took the last slot first
                return self._connect(endpoint, chosen.node_id)
            full = True
        if failures and not full:
            raise ClusterError(
                "no worker node could host a sandbox: " + "; ".join(failures)[:2000],
                fix="check the worker nodes: codemode must be installed there and bubblewrap "
                "must work (`codemode doctor` on the node); their Ray logs say more",
            )
        raise ClusterBusyError(self.cluster.busy_retry_after_s)

    def _unreachable(self, error: BaseException) -> ClusterError:
        return ClusterError(
            f"the Ray cluster at {self.cluster.address} does not answer ({describe_error(error)})",
            fix="check that the Ray head still runs (`ray status` on it) and is reachable",
        )

    def _no_workers(self, nodes: list[dict[str, Any]]) -> ClusterError:
        alive = sum(1 for node in nodes if node.get("Alive"))
        dead = len(nodes) - alive
        return ClusterError(
            f"no live worker node offers sandbox slots ({self.cluster.slot_resource}) in the "
            f"Ray cluster at {self.cluster.address}: {alive} live node(s) without slots"
            + (f", {dead} dead" if dead else ""),
            fix=_START_WORKER,
        )

    def fresh_from(self, old: Sandbox) -> tuple[Sandbox, list[str]]:
        """``fresh=true``: a new interpreter on ``old``'s node holding ``old``'s files (copied
        on the node), and the names that could not be carried."""
        import ray

        guest = remote_guest(old)
        with self._lock:
            agent = self._agents.get(guest.node or "")
        if agent is None:
            raise SandboxError(
                "the node of this session's sandbox is not known any more",
                fix="run without fresh=true, or start a new session",
            )
        try:
            endpoint = ray.get(
                agent.lease.remote(self._settings, guest.token),
                timeout=self.cluster.start_timeout_s,
            )
        except Exception as error:
            cause = getattr(error, "cause", None) or error
            raise SandboxError(
                f"could not start a fresh interpreter on the session's node: {cause}",
                fix="run again without fresh=true, or start a new session",
            ) from error
        if endpoint is None:
            raise ClusterBusyError(
                self.cluster.busy_retry_after_s,
                fix="a fresh interpreter needs a free slot on the session's node: retry then, "
                "or run without fresh=true",
            )
        sandbox = self._connect(endpoint, str(guest.node))
        found = sandbox.process.facts.list_workspace()
        sandbox.files = found.snapshot if found is not None else {}  # carried, not created
        carried = endpoint.get("carried") or {}
        skipped = carried.get("skipped") if isinstance(carried, dict) else None
        return sandbox, [str(name) for name in skipped or []]

    def _connect(self, endpoint: dict[str, Any], node_id: str) -> Sandbox:
        link = StreamLink(
            str(endpoint["host"]),
            int(endpoint["port"]),
            bytes.fromhex(str(endpoint["token"])),
            connect_timeout_s=self.cluster.control_timeout_s * 5,
            dead_peer_s=self.cluster.dead_peer_s,
            ask_timeout_s=self.cluster.control_timeout_s,
        )
        guest = RemoteGuest(endpoint, self.sandbox.limits, link, node_id)
        sandbox = Sandbox(guest, self.sandbox.limits)
        if not guest.isolated and not self.sandbox.unsafe_no_isolation:
            sandbox.kill()
            raise SandboxError(
                "a worker node started an unisolated sandbox",
                fix="install bubblewrap on the worker nodes",
            )
        guest.on_close = lambda: self._forget(sandbox)
        with self._lock:
            self._live.add(sandbox)
        try:
            sandbox.wait_ready(self.cluster.start_timeout_s)
        except BaseException:
            sandbox.kill()
            raise
        return sandbox

    def _forget(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._live.discard(sandbox)

    def close(self) -> None:
        """Kill every sandbox this gateway placed. The node agents and the Ray connection
        stay (other gateways share them)."""
        with self._lock:
            self._closed = True
            live = list(self._live)
        for sandbox in live:
            with contextlib.suppress(Exception):
                sandbox.kill()

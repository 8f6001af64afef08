"""Ray glue: the node agent as a Ray actor, one per worker node, found by name.

The agent is named after its node and detached, so every gateway replica finds the same one
(``get_if_exists``) and a node's warm pool and capacity are shared by all of them. Ray is
imported only here and in ``codemode.cluster.provider``.
"""

from __future__ import annotations

import functools
from typing import Any

from codemode.cluster.agent import NodeAgent
from codemode.settings.cluster import ClusterSettings

__all__ = ["agent_name", "node_agent"]

# Concurrent calls an agent serves: a lease that starts a cold guest must not hold up the
# load questions of other gateways.
_AGENT_THREADS = 16


def agent_name(node_id: str) -> str:
    return f"codemode-agent-{node_id}"


@functools.cache
def _agent_class() -> Any:
    import ray

    remote: Any = ray.remote
    return remote(max_concurrency=_AGENT_THREADS, max_restarts=0)(NodeAgent)


def node_agent(
    node_id: str,
    *,
    cluster: ClusterSettings,
    sandbox: dict[str, Any],
    slots: int,
    bind_host: str,
) -> Any:
    """The agent of ``node_id``, started there (with this gateway's sandbox settings for its
    warm pool) unless it runs already."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return (
        _agent_class()
        .options(
            name=agent_name(node_id),
            namespace=cluster.namespace,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        .remote(
            sandbox,
            slots=slots,
            warm=cluster.warm_per_node,
            bind_host=bind_host,
            accept_timeout_s=cluster.start_timeout_s,
            dead_peer_s=cluster.dead_peer_s,
        )
    )

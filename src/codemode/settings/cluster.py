"""``[cluster]``: run sandboxes on a Ray cluster's worker nodes instead of this machine."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from codemode.config_model import ConfigModel, Hint, PositiveNumber

__all__ = ["ClusterSettings"]


class ClusterSettings(ConfigModel):
    """Sandboxes run on the cluster's worker nodes when ``address`` is set.

    ``address`` is ``ray://HOST:PORT`` (Ray Client, the head's client port, 10001 by default)
    or ``HOST:PORT`` (the head's GCS port, from a machine that itself joined the cluster).
    Worker nodes offer sandbox slots as the custom resource named by ``slot_resource``
    (``ray start --resources '{"codemode_sandbox": 8}'``); nodes without it get no sandboxes.
    """

    address: Annotated[
        str | None,
        Hint(fix='write address = "ray://head.example:10001", or leave it out to run locally'),
    ] = None
    namespace: str = "codemode"
    slot_resource: str = "codemode_sandbox"
    # Guests each node keeps started ahead of demand (within its free slots).
    warm_per_node: Annotated[int, Field(ge=0, le=64)] = 2
    # The address gateways reach a node's sandboxes at. By default the node's address as Ray
    # reports it; set it where that is not reachable (a test cluster on 127.0.0.1).
    stream_host: str | None = None
    # A node agent or a sandbox that cannot start in this long is an error (the first
    # sandbox on a node starts a Ray worker process: seconds on a small machine).
    start_timeout_s: PositiveNumber = 60.0
    # Every question to a worker (its load, the guest's usage) is bounded by this. A lost
    # node ends its streams (see dead_peer_s), which ends the questions at once; this bounds
    # a node that is alive but slow (an unanswered question restarts the sandbox).
    control_timeout_s: PositiveNumber = 10.0
    # A worker that stops answering on the stream is declared lost after this long.
    dead_peer_s: Annotated[int, Field(ge=2, le=60)] = 4
    # What a full cluster tells callers: "busy, retry after N s".
    busy_retry_after_s: PositiveNumber = 5.0

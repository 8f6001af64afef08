"""The shared implementations of an engine's parts (``[gateway] shared_store``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemode.audit.batching import BatchedAuditLog
from codemode.checkpoints import KVCheckpoints
from codemode.engine.approvals import ApprovalBroker
from codemode.engine.parts import SessionParts, Wiring, registry_for
from codemode.engine.registry import SessionRegistry
from codemode.replicas.approvals import ApprovalRecords, SharedApprovalBroker
from codemode.replicas.audit import RedisAuditLog, shared_digest_key
from codemode.replicas.connection import SharedRedis
from codemode.replicas.directory import SessionDirectory
from codemode.replicas.keys import KEY_ENV, store_sealer
from codemode.replicas.link import ReplicaLink
from codemode.replicas.registry import SharedSessionRegistry
from codemode.replicas.sealed_store import SealedStore
from codemode.replicas.sealing import Sealer
from codemode.replicas.stores import RedisSessionStores
from codemode.state.redis import RedisStore

if TYPE_CHECKING:
    from codemode.config.model import GatewaySettings
    from codemode.engine.handover import Handover, ResumeApproved

__all__ = ["SharedState", "share_state", "shared_parts"]

log = logging.getLogger(__name__)


@dataclass
class SharedState:
    """What an engine uses instead of its in-process state, and the link to other replicas."""

    redis: SharedRedis
    registry: SharedSessionRegistry
    approvals: ApprovalBroker
    stores: RedisSessionStores
    audit_log: RedisAuditLog
    digest_key: bytes
    checkpoints: SealedStore
    link: ReplicaLink

    @property
    def replica(self) -> str:
        return self.registry.replica

    def close(self) -> None:
        self.link.close()
        self.checkpoints.close()
        self.redis.close()


def shared_parts(wiring: Wiring) -> SessionParts:
    """An engine's parts in the shared store (``[gateway] shared_store``): the replicas'
    ``PartsFactory``. The audit log is the shared one unless the caller gave its own."""
    shared = share_state(
        wiring.config.gateway,
        registry_for(wiring),
        wiring.resuming,
        resume=wiring.resume,
        handover=wiring.handover,
    )
    try:
        shared.link.start(wiring.loop)
    except BaseException:
        shared.close()
        raise
    audit_log, digest_key = wiring.audit_log, None
    if audit_log is None and wiring.audit:
        audit_log, digest_key = BatchedAuditLog(shared.audit_log), shared.digest_key
    return SessionParts(
        shared.registry, shared.approvals, shared.stores, audit_log, digest_key, shared
    )


def share_state(
    gateway: GatewaySettings,
    local: SessionRegistry,
    restoring: set[str],
    *,
    resume: ResumeApproved,
    handover: Handover | None = None,
) -> SharedState:
    """Connect to the shared store and build the shared registry, approvals, stores and
    audit log of an engine. ``local`` is the registry the engine would have had alone (its
    limits, session factory and close listeners carry over); ``resume`` is the engine's: it
    runs an approval pending on this replica."""
    assert gateway.shared_store is not None
    sealer = store_sealer(gateway)
    redis = SharedRedis(gateway.shared_store)
    try:
        return _share(gateway, local, restoring, handover, redis, sealer, resume)
    except BaseException:
        redis.close()
        raise


def _share(
    gateway: GatewaySettings,
    local: SessionRegistry,
    restoring: set[str],
    handover: Handover | None,
    redis: SharedRedis,
    sealer: Sealer,
    resume: ResumeApproved,
) -> SharedState:
    assert gateway.shared_store is not None
    if not sealer.encrypted:
        log.warning(
            "SHARED STORE NOT ENCRYPTED: vault values (the PII kept from the model), session "
            "checkpoints and results handed between replicas are stored in plain text in %s "
            "(its memory, dumps and replicas). Make a key with `codemode replicas keygen "
            'PATH` and set [gateway] shared_store_key_file = "PATH" (or %s) on every replica',
            gateway.shared_store,
            KEY_ENV,
        )
    else:
        log.info("shared store values are sealed: %s", sealer.describe())
    digest_key = shared_digest_key(redis, sealer)  # first: a wrong key fails the start
    replica = redis.new_id("r_")
    idle_s = gateway.session_idle_timeout_s
    directory = SessionDirectory(redis, replica, lease_s=gateway.session_lease_s, idle_s=idle_s)
    stores = RedisSessionStores(redis, ttl_s=idle_s + gateway.session_lease_s, sealer=sealer)
    checkpoints = SealedStore(
        RedisStore(gateway.shared_store, namespace=redis.namespace),
        sealer,
        namespace=redis.namespace,
    )

    def forget(handle: str) -> None:
        directory.forget(handle, *stores.keys(handle))
        KVCheckpoints(checkpoints).delete(handle)

    registry = SharedSessionRegistry(
        local.factory,
        directory=directory,
        restoring=restoring,
        forget=forget,
        handover=handover,
        idle_timeout_s=idle_s,
        max_sessions=local.max_sessions,
        max_per_client=local.max_per_client,
        max_stored=local.max_stored,
        evict_idle=local.evict_idle,
    )
    registry.on_close.extend(local.on_close)
    records = ApprovalRecords(redis, replica)
    approvals = SharedApprovalBroker(records)
    link = ReplicaLink(
        resume,
        redis,
        directory,
        records,
        registry,
        lease_s=gateway.session_lease_s,
        wait_limit_s=approvals.wait_limit_s,
        sealer=sealer,
    )
    return SharedState(
        redis,
        registry,
        approvals,
        stores,
        RedisAuditLog(redis),
        digest_key,
        checkpoints,
        link,
    )

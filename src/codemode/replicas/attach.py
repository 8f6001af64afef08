"""Put the shared implementations in an engine's place (``[gateway] shared_store``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemode.engine.approvals import ApprovalBroker
from codemode.engine.registry import SessionRegistry
from codemode.replicas.approvals import ApprovalRecords, SharedApprovalBroker
from codemode.replicas.audit import RedisAuditLog
from codemode.replicas.connection import SharedRedis
from codemode.replicas.defaults import SharedDefaultSessions
from codemode.replicas.directory import SessionDirectory
from codemode.replicas.link import ReplicaLink
from codemode.replicas.registry import Handover, SharedSessionRegistry
from codemode.replicas.stores import RedisSessionStores
from codemode.skills.checkpoint import KVCheckpoints
from codemode.state.redis import RedisStore

if TYPE_CHECKING:
    from codemode.engine.sharing import SharingMixin

__all__ = ["SharedState", "share_state"]


@dataclass
class SharedState:
    """What an engine uses instead of its in-process state, and the link to other replicas."""

    redis: SharedRedis
    registry: SharedSessionRegistry
    approvals: ApprovalBroker
    stores: RedisSessionStores
    audit_log: RedisAuditLog
    digest_key: bytes
    checkpoints: RedisStore
    link: ReplicaLink
    # Each identified client's default session (its calls without a handle).
    default_sessions: SharedDefaultSessions

    @property
    def replica(self) -> str:
        return self.registry.replica

    def close(self) -> None:
        self.link.close()
        self.checkpoints.close()
        self.redis.close()


def share_state(
    engine: SharingMixin,
    local: SessionRegistry,
    restoring: set[str],
    handover: Handover | None = None,
) -> SharedState:
    """Connect to the shared store and build the shared registry, approvals, stores and
    audit log for ``engine`` (whose ``local`` registry is replaced; it holds no session)."""
    gateway = engine.config.gateway
    assert gateway.shared_store is not None
    redis = SharedRedis(gateway.shared_store)
    replica = redis.new_id("r_")
    idle_s = gateway.session_idle_timeout_s
    directory = SessionDirectory(redis, replica, lease_s=gateway.session_lease_s, idle_s=idle_s)
    stores = RedisSessionStores(redis, ttl_s=idle_s + gateway.session_lease_s)
    checkpoints = RedisStore(gateway.shared_store, namespace=redis.namespace)

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
    approvals = SharedApprovalBroker(records, wait_limit_s=engine.approvals.wait_limit_s)
    link = ReplicaLink(
        engine,
        redis,
        directory,
        records,
        registry,
        lease_s=gateway.session_lease_s,
        wait_limit_s=engine.approvals.wait_limit_s,
    )
    # One key for argument digests in the audit log, the same on every replica.
    key_name = redis.key("audit", "key")
    redis.call(redis.client.set, key_name, secrets.token_bytes(32), nx=True)
    digest_key = bytes(redis.call(redis.client.get, key_name))
    defaults = SharedDefaultSessions(redis, ttl_s=idle_s)
    return SharedState(
        redis,
        registry,
        approvals,
        stores,
        RedisAuditLog(redis),
        digest_key,
        checkpoints,
        link,
        defaults,
    )

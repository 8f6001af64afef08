"""The cluster-wide directory of sessions, and the lease a replica holds on a running one.

``session:{handle}`` is a hash (owner, holder: the replica that ran it last) that expires when
the session is idle for ``idle_s``. ``lease:{handle}`` names the replica running it now; it
expires after ``lease_s`` unless that replica renews it, so a replica that died frees its
sessions by itself. ``closed:{handle}`` marks a session closed for good (for as long as
copies of it may live on). Claiming is one Lua script: the owner check, the lease and the new holder
change together or not at all. ``replica:{id}`` is each replica's heartbeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from codemode.replicas.connection import SharedRedis

__all__ = ["Claim", "SessionDirectory", "owner_tag"]

_CLAIM = """
if redis.call('EXISTS', KEYS[3]) == 1 then return {'closed', '', 0} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown', '', 0} end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return {'unknown', '', 0} end
local held = redis.call('GET', KEYS[2])
if held and held ~= ARGV[1] then return {'busy', held, redis.call('PTTL', KEYS[2])} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
local last = redis.call('HGET', KEYS[1], 'holder') or ''
redis.call('HSET', KEYS[1], 'holder', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok', last, 0}
"""

# A session this replica registers (a new one, or one resumed from its checkpoint).
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2]
then return {'unknown', '', 0} end
local held = redis.call('GET', KEYS[2])
if held and held ~= ARGV[1] then return {'busy', held, redis.call('PTTL', KEYS[2])} end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'holder', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return {'ok', '', 0}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""

# KEYS: the leases, then the sessions' entries (a session running for long stays known).
_RENEW = """
local lost = {}
local count = #KEYS / 2
for index = 1, count do
  if redis.call('GET', KEYS[index]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[index], ARGV[2])
    redis.call('PEXPIRE', KEYS[count + index], ARGV[3])
  else
    table.insert(lost, index)
  end
end
return lost
"""


def owner_tag(owner: str | None) -> str:
    """How an owner is written in the store (None, anonymous, is not any owner's name)."""
    return "-" if owner is None else "o:" + owner


@dataclass(frozen=True)
class Claim:
    status: Literal["ok", "unknown", "busy", "closed"]
    # ok: the replica that ran the session before ('' for none); busy: the one running it.
    replica: str = ""
    retry_after_s: float = 0.0


class SessionDirectory:
    def __init__(self, redis: SharedRedis, replica: str, *, lease_s: float, idle_s: float) -> None:
        self.redis = redis
        self.replica = replica
        self.lease_ms = max(int(lease_s * 1000), 100)
        self.idle_ms = max(int(idle_s * 1000), self.lease_ms)
        self._claim = redis.script(_CLAIM)
        self._create = redis.script(_CREATE)
        self._release = redis.script(_RELEASE)
        self._renew = redis.script(_RENEW)

    def _entry(self, handle: str) -> str:
        return self.redis.key("session", handle)

    def _lease(self, handle: str) -> str:
        return self.redis.key("lease", handle)

    def _closed(self, handle: str) -> str:
        return self.redis.key("closed", handle)

    def create(self, handle: str, owner: str | None) -> Claim:
        """Register a session run here (new, or resumed from its checkpoint) and claim it,
        unless another replica holds its lease."""
        return self._answer(
            self._create(
                keys=[self._entry(handle), self._lease(handle)],
                args=[self.replica, owner_tag(owner), self.lease_ms, self.idle_ms],
            )
        )

    def claim(self, handle: str, owner: str | None) -> Claim:
        """Take the lease on ``handle`` for this replica, unless another one holds it."""
        return self._answer(
            self._claim(
                keys=[self._entry(handle), self._lease(handle), self._closed(handle)],
                args=[self.replica, owner_tag(owner), self.lease_ms, self.idle_ms],
            )
        )

    def _answer(self, answer: list[object]) -> Claim:
        status, replica, ttl_ms = answer
        name = status.decode() if isinstance(status, bytes) else str(status)
        who = replica.decode() if isinstance(replica, bytes) else str(replica)
        if name == "busy":
            return Claim("busy", who, max(int(str(ttl_ms)), 0) / 1000)
        if name == "closed":
            return Claim("closed", who)
        return Claim("ok" if name == "ok" else "unknown", who)

    def release(self, handle: str) -> None:
        """Give the lease back (the session stays known; its idle time starts now)."""
        self._release(
            keys=[self._lease(handle), self._entry(handle)], args=[self.replica, self.idle_ms]
        )

    def renew(self, handles: list[str]) -> list[str]:
        """Extend this replica's leases; returns the handles whose lease was lost."""
        if not handles:
            return []
        keys = [self._lease(h) for h in handles] + [self._entry(h) for h in handles]
        lost = self._renew(keys=keys, args=[self.replica, self.lease_ms, self.idle_ms])
        return [handles[int(index) - 1] for index in lost]

    def holder(self, handle: str) -> str | None:
        """The replica that ran ``handle`` last, or None when the session is not known."""
        found = self.redis.call(self.redis.client.hget, self._entry(handle), "holder")
        return None if found is None else found.decode()

    def forget(self, handle: str, *keys: str) -> None:
        """The session ended for good: drop its entry, its lease and ``keys`` (its vault,
        budget), and leave a mark so stale copies on other replicas are dropped too."""
        pipe = self.redis.client.pipeline(transaction=True)
        pipe.delete(self._entry(handle), self._lease(handle), *keys)
        pipe.set(self._closed(handle), b"1", px=self.idle_ms)
        self.redis.call(pipe.execute)

    def beat(self, ttl_s: float) -> None:
        """This replica is alive for ``ttl_s`` more seconds."""
        key = self.redis.key("replica", self.replica)
        self.redis.call(self.redis.client.set, key, b"1", px=max(int(ttl_s * 1000), 100))

    def alive(self, replica: str) -> bool:
        key = self.redis.key("replica", replica)
        return bool(self.redis.call(self.redis.client.exists, key))

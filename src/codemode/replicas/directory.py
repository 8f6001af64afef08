"""The cluster-wide directory of sessions, and the lease a replica holds on a running one.

``session:{handle}`` is a hash (owner, holder: the replica that ran it last) that expires when
the session is idle for ``idle_s``. ``lease:{handle}`` names the replica running it now; it
expires after ``lease_s`` unless that replica renews it, so a replica that died frees its
sessions by itself. ``closed:{handle}`` marks a session closed for good (for as long as
copies of it may live on). Claiming is one Lua script: the owner check, the lease and the new holder
change together or not at all. ``replica:{id}`` is each replica's heartbeat.

``client:{client}:sessions`` counts a client's sessions on every replica (its
``max_sessions_per_client``): a sorted set of handles, each scored by when it lapses (the
server's clock, in ms), pushed back whenever the session's entry is (created, released,
renewed), so a session counts until it is closed (``forget``) or its entry expires, on a dead
replica's too. Opening checks the count and adds the handle in the script that creates the
entry; the set itself expires with its last member. A session that moves keeps its handle,
so it counts once; the replica that claims it learns its client from the entry.

A released session (its sandbox checkpointed and stopped while idle) holds no place, as on a
lone gateway: ``uncount`` marks its entry ``released`` and takes it out of the set (nothing
counts it again while the mark stays), and ``rejoin``, before it runs code again on any
replica, clears the mark and adds it back, checking the quota in the same script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from codemode.replicas.connection import SharedRedis

__all__ = ["Claim", "SessionDirectory", "owner_tag"]

# The server's clock in ms, and the client's count: ``count(set, entry, handle, idle)`` pushes
# ``handle``'s lapse back to idle ms from now while its entry exists and is not marked released
# (a closed or released session is not counted again). ``full(set, quota, handle)``: the
# answer refusing a new place when the client holds ``quota`` (-1: none), else nil.
_COUNT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local function count(set, entry, handle, idle)
  if redis.call('EXISTS', entry) == 0 then return end
  if redis.call('HGET', entry, 'released') == '1' then return end
  redis.call('ZADD', set, now + tonumber(idle), handle)
  redis.call('PEXPIRE', set, idle)
end
local function full(set, quota, handle)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  local sessions = redis.call('ZCARD', set)
  if tonumber(quota) < 0 or sessions < tonumber(quota) or redis.call('ZSCORE', set, handle) then
    return nil
  end
  local answer = {'full', '', sessions}
  for _, held in ipairs(redis.call('ZRANGE', set, 0, -1)) do table.insert(answer, held) end
  return answer
end
"""

_CLAIM = """
if redis.call('EXISTS', KEYS[3]) == 1 then return {'closed', '', 0, ''} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown', '', 0, ''} end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return {'unknown', '', 0, ''} end
local held = redis.call('GET', KEYS[2])
if held and held ~= ARGV[1] then return {'busy', held, redis.call('PTTL', KEYS[2]), ''} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
local last = redis.call('HGET', KEYS[1], 'holder') or ''
redis.call('HSET', KEYS[1], 'holder', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local client = redis.call('HGET', KEYS[1], 'client') or ''
return {'ok', last, 0, client, redis.call('HGET', KEYS[1], 'released') or ''}
"""

# A session this replica registers (a new one, or one resumed from its checkpoint). KEYS:
# entry, lease, and with a client its set. ARGV: replica, owner, lease ms, idle ms, and with
# a client: its name, the handle, its quota (-1: counted, never refused: a resumed session).
_CREATE = (
    _COUNT
    + """
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2]
then return {'unknown', '', 0} end
local held = redis.call('GET', KEYS[2])
if held and held ~= ARGV[1] then return {'busy', held, redis.call('PTTL', KEYS[2])} end
if KEYS[3] then
  local refused = full(KEYS[3], ARGV[7], ARGV[6])
  if refused then return refused end
  redis.call('HSET', KEYS[1], 'client', ARGV[5])
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'holder', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if KEYS[3] then count(KEYS[3], KEYS[1], ARGV[6], ARGV[4]) end
return {'ok', '', 0}
"""
)

# Released by ARGV[1] (only the replica that ran it last: a stale copy elsewhere says
# nothing). KEYS: entry, the client's set. ARGV: replica, handle.
_UNCOUNT = """
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'released', '1')
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""

# A released session about to run code again. KEYS: entry, the client's set. ARGV: handle,
# idle ms, quota (-1: counted, never refused).
_REJOIN = (
    _COUNT
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'ok', '', 0} end
local refused = full(KEYS[2], ARGV[3], ARGV[1])
if refused then return refused end
redis.call('HDEL', KEYS[1], 'released')
count(KEYS[2], KEYS[1], ARGV[1], ARGV[2])
return {'ok', '', 0}
"""
)

# KEYS: lease, entry, and with a client its set. ARGV: replica, idle ms, and the handle.
_RELEASE = (
    _COUNT
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if KEYS[3] then count(KEYS[3], KEYS[2], ARGV[3], ARGV[2]) end
return 1
"""
)

# KEYS: the leases, the sessions' entries (a session running for long stays known), then the
# sets of the clients of those whose ARGV[3 + index] is their handle ('': counted nowhere).
_RENEW = (
    _COUNT
    + """
local lost = {}
local total = #ARGV - 3
local next_set = 2 * total + 1
for index = 1, total do
  local set = nil
  if ARGV[3 + index] ~= '' then
    set = KEYS[next_set]
    next_set = next_set + 1
  end
  if redis.call('GET', KEYS[index]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[index], ARGV[2])
    redis.call('PEXPIRE', KEYS[total + index], ARGV[3])
    if set then count(set, KEYS[total + index], ARGV[3 + index], ARGV[3]) end
  else
    table.insert(lost, index)
  end
end
return lost
"""
)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def owner_tag(owner: str | None) -> str:
    """How an owner is written in the store (None, anonymous, is not any owner's name)."""
    return "-" if owner is None else "o:" + owner


@dataclass(frozen=True)
class Claim:
    status: Literal["ok", "unknown", "busy", "closed", "full"]
    # ok: the replica that ran the session before ('' for none); busy: the one running it.
    replica: str = ""
    retry_after_s: float = 0.0
    # ok (a claim): the client the session counts against ('' for none).
    client: str = ""
    # full: the sessions the client holds on every replica (its quota is reached), and their
    # handles.
    held: int = 0
    holding: tuple[str, ...] = ()
    # ok (a claim): the session was released (it holds no place until it ``rejoin``s).
    released: bool = False


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
        self._uncount = redis.script(_UNCOUNT)
        self._rejoin = redis.script(_REJOIN)

    def _entry(self, handle: str) -> str:
        return self.redis.key("session", handle)

    def _lease(self, handle: str) -> str:
        return self.redis.key("lease", handle)

    def _closed(self, handle: str) -> str:
        return self.redis.key("closed", handle)

    def _sessions_of(self, client: str) -> str:
        return self.redis.key("client", client, "sessions")

    def create(
        self, handle: str, owner: str | None, client: str | None = None, quota: int | None = None
    ) -> Claim:
        """Register a session run here (new, or resumed from its checkpoint) and claim it,
        unless another replica holds its lease. With ``client`` it counts against that
        client on every replica; with ``quota`` too it is refused (``full``) when the client
        holds that many sessions already (without, it is counted but never refused)."""
        keys = [self._entry(handle), self._lease(handle)]
        args: list[object] = [self.replica, owner_tag(owner), self.lease_ms, self.idle_ms]
        if client is not None:
            keys.append(self._sessions_of(client))
            args += [client, handle, -1 if quota is None else quota]
        return self._answer(self._create(keys=keys, args=args))

    def claim(self, handle: str, owner: str | None) -> Claim:
        """Take the lease on ``handle`` for this replica, unless another one holds it."""
        return self._answer(
            self._claim(
                keys=[self._entry(handle), self._lease(handle), self._closed(handle)],
                args=[self.replica, owner_tag(owner), self.lease_ms, self.idle_ms],
            )
        )

    def _answer(self, answer: list[object]) -> Claim:
        name, who, number = _text(answer[0]), _text(answer[1]), int(str(answer[2]))
        if name == "busy":
            return Claim("busy", who, max(number, 0) / 1000)
        if name == "full":
            return Claim("full", held=number, holding=tuple(_text(h) for h in answer[3:]))
        if name == "closed":
            return Claim("closed", who)
        client = _text(answer[3]) if len(answer) > 3 else ""
        released = len(answer) > 4 and _text(answer[4]) == "1"
        return Claim("ok" if name == "ok" else "unknown", who, client=client, released=released)

    def release(self, handle: str, client: str | None = None) -> None:
        """Give the lease back (the session stays known; its idle time starts now, and so
        does that of its place in ``client``'s count)."""
        keys = [self._lease(handle), self._entry(handle)]
        args: list[object] = [self.replica, self.idle_ms]
        if client is not None:
            keys.append(self._sessions_of(client))
            args.append(handle)
        self._release(keys=keys, args=args)

    def uncount(self, handle: str, client: str) -> bool:
        """``handle`` was released by this replica: it leaves ``client``'s count until it
        ``rejoin``s. False (nothing changed) when another replica ran it since."""
        keys = [self._entry(handle), self._sessions_of(client)]
        return bool(self._uncount(keys=keys, args=[self.replica, handle]))

    def rejoin(self, handle: str, client: str, quota: int | None) -> Claim:
        """A released ``handle`` is about to run code: it counts against ``client`` again,
        unless the client holds ``quota`` sessions already (``full``, nothing changed)."""
        keys = [self._entry(handle), self._sessions_of(client)]
        args: list[object] = [handle, self.idle_ms, -1 if quota is None else quota]
        return self._answer(self._rejoin(keys=keys, args=args))

    def leases(self, handles: list[str]) -> list[str | None]:
        """The replica running each of ``handles`` now (None: none is)."""
        if not handles:
            return []
        found = self.redis.call(self.redis.client.mget, [self._lease(h) for h in handles])
        return [None if value is None else _text(value) for value in found]

    def renew(self, handles: list[str], clients: Mapping[str, str] | None = None) -> list[str]:
        """Extend this replica's leases (and the places of those sessions in their
        ``clients``' counts); returns the handles whose lease was lost."""
        if not handles:
            return []
        clients = clients or {}
        keys = [self._lease(h) for h in handles] + [self._entry(h) for h in handles]
        keys += [self._sessions_of(clients[h]) for h in handles if h in clients]
        counted = [h if h in clients else "" for h in handles]
        lost = self._renew(keys=keys, args=[self.replica, self.lease_ms, self.idle_ms, *counted])
        return [handles[int(index) - 1] for index in lost]

    def holder(self, handle: str) -> str | None:
        """The replica that ran ``handle`` last, or None when the session is not known."""
        found = self.redis.call(self.redis.client.hget, self._entry(handle), "holder")
        return None if found is None else found.decode()

    def forget(self, handle: str, *keys: str) -> None:
        """The session ended for good: drop its entry, its lease, its place in its client's
        count and ``keys`` (its vault, budget), and leave a mark so stale copies on other
        replicas are dropped too."""
        client = self.redis.call(self.redis.client.hget, self._entry(handle), "client")
        pipe = self.redis.client.pipeline(transaction=True)
        pipe.delete(self._entry(handle), self._lease(handle), *keys)
        if client is not None:
            pipe.zrem(self._sessions_of(client.decode()), handle)
        pipe.set(self._closed(handle), b"1", px=self.idle_ms)
        self.redis.call(pipe.execute)

    def client_sessions(self, client: str) -> int:
        """How many sessions ``client`` holds on every replica now."""
        seconds, micros = self.redis.call(self.redis.client.time)
        now_ms = seconds * 1000 + micros // 1000
        key = self._sessions_of(client)
        return int(self.redis.call(self.redis.client.zcount, key, f"({now_ms}", "+inf"))

    def beat(self, ttl_s: float) -> None:
        """This replica is alive for ``ttl_s`` more seconds."""
        key = self.redis.key("replica", self.replica)
        self.redis.call(self.redis.client.set, key, b"1", px=max(int(ttl_s * 1000), 100))

    def alive(self, replica: str) -> bool:
        key = self.redis.key("replica", replica)
        return bool(self.redis.call(self.redis.client.exists, key))

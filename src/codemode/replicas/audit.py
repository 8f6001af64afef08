"""``RedisAuditLog``: one audit log that every replica appends to, hash-chained.

Events go to the stream ``audit`` (``XADD``, acknowledged before ``append`` returns; an
engine appends through ``audit.batching.BatchedAuditLog``, many events to a script). Each
entry carries ``prev`` and ``hash`` = SHA-1(prev + event), computed in the same Lua script
that appends it, so concurrent writers on any number of replicas still form one unbroken
chain; ``verify`` walks it and names the first entry that was changed, removed or inserted.

Events are not sealed: they hold no argument or result, only an HMAC digest of the arguments,
names and a message scrubbed of PII, and ``codemode audit`` reads them without the key. The
HMAC key (``audit:key``, one for every replica) is sealed: with it, anyone holding a copy of
the store could confirm a guessed argument value against the digests.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import asdict

from codemode.audit.events import AuditEvent, AuditFilter, event_matches
from codemode.errors import StateStoreError
from codemode.replicas.connection import SharedRedis
from codemode.replicas.sealing import Sealer

__all__ = ["RedisAuditLog", "check_digest_key", "shared_audit_events", "shared_digest_key"]

log = logging.getLogger(__name__)
_DIGEST_KEY_BYTES = 32

# Replace KEYS[1] by ARGV[2] only if it still holds ARGV[1]; answer what it holds then.
_SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) end
return redis.call('GET', KEYS[1])
"""

# Each of ARGV, in order, chained after the head: one round trip for one event or a batch.
_APPEND = """
local prev = redis.call('GET', KEYS[2]) or ''
for i = 1, #ARGV do
  local digest = redis.sha1hex(prev .. ARGV[i])
  redis.call('XADD', KEYS[1], '*', 'event', ARGV[i], 'prev', prev, 'hash', digest)
  prev = digest
end
redis.call('SET', KEYS[2], prev)
return prev
"""


class RedisAuditLog:
    def __init__(self, redis: SharedRedis) -> None:
        self.redis = redis
        self.stream = redis.key("audit")
        self.head = redis.key("audit", "head")
        self._append = redis.script(_APPEND)
        self._closed = False

    def append(self, event: AuditEvent) -> None:
        self.append_many((event,))

    def append_many(self, events: Sequence[AuditEvent]) -> None:
        """``append`` each of ``events``, in order, in one script (one round trip)."""
        if self._closed:
            raise StateStoreError("the audit log is closed", fix="append before closing it")
        if events:
            self._append(keys=[self.stream, self.head], args=[_payload(e) for e in events])

    def sync(self) -> bool:
        return True  # each append is stored before it returns

    def _entries(self) -> list[tuple[str, dict[bytes, bytes]]]:
        found = self.redis.call(self.redis.client.xrange, self.stream)
        return [(ident.decode(), fields) for ident, fields in found]

    def query(self, filters: AuditFilter | None = None) -> list[AuditEvent]:
        filters = filters or AuditFilter()
        events = [AuditEvent(**json.loads(fields[b"event"])) for _, fields in self._entries()]
        found = [event for event in events if event_matches(event, filters)]
        if filters.limit is not None:
            found = found[-filters.limit :] if filters.limit > 0 else []
        return found

    def verify(self) -> int:
        """Check the chain from the first entry to the head; returns how many entries."""
        prev = ""
        entries = self._entries()
        for ident, fields in entries:
            expected = hashlib.sha1(  # noqa: S324 - a chain link, computed by the server too
                (prev + fields[b"event"].decode()).encode()
            ).hexdigest()
            if fields[b"prev"].decode() != prev or fields[b"hash"].decode() != expected:
                raise StateStoreError(
                    f"the shared audit log's chain is broken at entry {ident}",
                    fix="an entry before it was changed, removed or inserted: investigate",
                )
            prev = expected
        head = self.redis.call(self.redis.client.get, self.head)
        if (head or b"").decode() != prev:
            raise StateStoreError(
                "the shared audit log's newest entries were removed (its head moved on)",
                fix="investigate who trimmed the stream",
            )
        return len(entries)

    def close(self) -> None:
        self._closed = True


def _payload(event: AuditEvent) -> str:
    return json.dumps(asdict(event), sort_keys=True, separators=(",", ":"))


def shared_audit_events(url: str, filters: AuditFilter) -> list[AuditEvent]:
    """The events of the shared log at ``url`` that match ``filters`` (for ``codemode audit``)."""
    redis = SharedRedis(url)
    try:
        return RedisAuditLog(redis).query(filters)
    finally:
        redis.close()


def shared_digest_key(redis: SharedRedis, sealer: Sealer) -> bytes:
    """The key of the argument digests, the same on every replica: made by the first one,
    sealed when a key is set. A plain one found while a key is set is replaced (digests
    before and after differ); one sealed with an old key is sealed again with the current."""
    name = redis.key("audit", "key")
    swap = redis.script(_SWAP)
    fresh = secrets.token_bytes(_DIGEST_KEY_BYTES)
    redis.call(redis.client.set, name, sealer.seal(fresh, bound_to=name), nx=True)
    stored = bytes(redis.call(redis.client.get, name))
    if len(stored) == _DIGEST_KEY_BYTES:  # plain: written without a key
        if not sealer.encrypted:
            return stored
        log.warning(
            "the shared audit log's digest key was stored unencrypted; it is replaced by a "
            "new, encrypted one (argument digests before and after this differ)"
        )
        stored = bytes(swap(keys=[name], args=[stored, sealer.seal(fresh, bound_to=name)]))
    plain = sealer.open(stored, bound_to=name)
    if sealer.stale(stored, bound_to=name):
        stored = bytes(swap(keys=[name], args=[stored, sealer.seal(plain, bound_to=name)]))
        plain = sealer.open(stored, bound_to=name)
    return plain


def check_digest_key(redis: SharedRedis, sealer: Sealer) -> bool:
    """Whether the store holds a digest key yet; ``SharedStoreDecryptError`` when ``sealer``
    cannot open it (a replica with this key would refuse to start). Changes nothing."""
    name = redis.key("audit", "key")
    stored = redis.call(redis.client.get, name)
    if stored is None:
        return False
    if len(stored) != _DIGEST_KEY_BYTES:  # a plain one is replaced when a keyed replica starts
        sealer.open(bytes(stored), bound_to=name)
    return True

"""Each identified client's default session (the one its handle-less calls use), shared by
every replica: ``default:{client}`` -> handle, expiring when idle like the session."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from codemode.replicas.connection import SharedRedis

__all__ = ["SharedDefaultSessions"]


class SharedDefaultSessions(MutableMapping[str, str]):
    def __init__(self, redis: SharedRedis, *, ttl_s: float) -> None:
        self.redis = redis
        self.ttl_ms = max(int(ttl_s * 1000), 1000)
        self._prefix = redis.key("default", "")

    def __getitem__(self, client: str) -> str:
        found = self.redis.call(self.redis.client.get, self._prefix + client)
        if found is None:
            raise KeyError(client)
        return bytes(found).decode()

    def __setitem__(self, client: str, handle: str) -> None:
        self.redis.call(self.redis.client.set, self._prefix + client, handle, px=self.ttl_ms)

    def __delitem__(self, client: str) -> None:
        if not self.redis.call(self.redis.client.delete, self._prefix + client):
            raise KeyError(client)

    def __iter__(self) -> Iterator[str]:
        keys = self.redis.call(lambda: list(self.redis.client.scan_iter(self._prefix + "*")))
        return iter(bytes(key).decode()[len(self._prefix) :] for key in keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)

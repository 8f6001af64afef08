"""``RedisStore``: the short-term tier on a Redis-compatible server (Redis, Valkey).

Needs the ``redis`` client (``pip install 'codemode[redis]'``). A server that is down or goes
away raises ``StateStoreError`` naming the URL and the fix; nothing is retried silently.
"""

from __future__ import annotations

import time
from typing import Any

from codemode.errors import StateStoreError
from codemode.state.store import StoredValue

__all__ = ["RedisStore"]


class RedisStore:
    def __init__(self, url: str, *, namespace: str = "codemode:", timeout_s: float = 2.0) -> None:
        try:
            import redis
        except ImportError:
            raise StateStoreError(
                "the Redis state store needs the redis client",
                fix="pip install 'codemode[redis]' (or pip install redis)",
            ) from None
        self.url = url
        self.namespace = namespace
        # A server-side refusal (a wrong type for INCRBY) is the caller's mistake, not an outage.
        self._refusal: type[BaseException] = redis.ResponseError
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._call(self._client.ping)

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except self._refusal as error:
            raise ValueError(str(error)) from None
        except self._errors as error:
            raise StateStoreError(
                f"the Redis server at {self.url} did not answer: {error}",
                fix="start it (or check state.redis_url); values acknowledged before are kept "
                "in the durable tier",
            ) from None

    def get(self, key: str) -> StoredValue | None:
        pipe = self._client.pipeline(transaction=False)
        pipe.get(self.namespace + key)
        pipe.pttl(self.namespace + key)
        data, ttl_ms = self._call(pipe.execute)
        if data is None:
            return None
        expires = time.time() + ttl_ms / 1000 if ttl_ms is not None and ttl_ms > 0 else None
        return StoredValue(bytes(data), expires)

    def set(self, key: str, data: bytes, *, expires_at: float | None = None) -> None:
        if expires_at is None:
            self._call(self._client.set, self.namespace + key, data)
            return
        ttl_ms = int((expires_at - time.time()) * 1000)
        if ttl_ms <= 0:  # already expired: as if set and gone at once
            self._call(self._client.delete, self.namespace + key)
            return
        self._call(self._client.set, self.namespace + key, data, px=ttl_ms)

    def delete(self, key: str) -> bool:
        return bool(self._call(self._client.delete, self.namespace + key))

    def incr(self, key: str, by: int = 1) -> int:
        # INCRBY keeps the key's TTL, as the other stores do.
        return int(self._call(self._client.incrby, self.namespace + key, by))

    def delete_prefix(self, prefix: str) -> int:
        deleted = 0
        pattern = _glob_escape(self.namespace + prefix) + "*"
        for key in self._call(lambda: list(self._client.scan_iter(match=pattern, count=500))):
            deleted += int(self._call(self._client.delete, key))
        return deleted

    def usage(self, prefix: str) -> tuple[int, int]:
        """(keys, bytes of keys and values) under ``prefix``: a scan, for quota recounts."""
        pattern = _glob_escape(self.namespace + prefix) + "*"
        keys = self._call(lambda: list(self._client.scan_iter(match=pattern, count=500)))
        if not keys:
            return 0, 0
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.strlen(key)
        sizes = self._call(pipe.execute)
        skip = len(self.namespace)
        live = [(key, size) for key, size in zip(keys, sizes, strict=True) if size]
        return len(live), sum(len(key) - skip + int(size) for key, size in live)

    def close(self) -> None:
        self._client.close()


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)

"""One connection to the shared Redis-compatible server, with its key names and scripts."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from codemode.errors import StateStoreError

__all__ = ["SharedRedis"]

T = TypeVar("T")


class SharedRedis:
    """A ``redis`` client for ``url`` whose failures raise ``StateStoreError``. Every key
    this package writes starts with ``namespace``."""

    def __init__(
        self, url: str, *, namespace: str = "codemode:shared:", timeout_s: float = 5.0
    ) -> None:
        try:
            import redis
        except ImportError:
            raise StateStoreError(
                "gateway.shared_store needs the redis client",
                fix="pip install 'codemode[redis]' (or pip install redis)",
            ) from None
        self.url = url
        self.namespace = namespace
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self.call(self.client.ping)

    def key(self, *parts: str) -> str:
        return self.namespace + ":".join(parts)

    def call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except self._errors as error:
            raise StateStoreError(
                f"the shared store at {self.url} did not answer: {error}",
                fix="start it, or check gateway.shared_store; every replica needs it",
            ) from None

    def script(self, source: str) -> Callable[..., Any]:
        """A Lua script, run atomically on the server: ``run(keys=[...], args=[...])``."""
        registered = self.client.register_script(source)

        def run(*, keys: list[str], args: list[Any]) -> Any:
            return self.call(registered, keys=keys, args=args)

        return run

    def new_id(self, prefix: str) -> str:
        return prefix + secrets.token_urlsafe(9)

    def close(self) -> None:
        self.client.close()

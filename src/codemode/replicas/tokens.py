"""Do the replicas accept the same bearer tokens? Each replica serving HTTP publishes a
fingerprint of its token set in the shared store (``tokenset:<run>``, renewed while it serves);
``codemode doctor`` compares the fingerprints of the live ones.

A load balancer sends a client's requests to any replica, so replicas with different token
sets answer each other's clients 401. The fingerprint is a slow hash (PBKDF2) of the owners and
the tokens' SHA-256 digests: it tells sets apart without helping anyone guess a token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from codemode.replicas.connection import SharedRedis

__all__ = ["TokenSetBeacon", "live_token_sets", "token_set_fingerprint"]

_SALT = b"codemode token set v1"
_ROUNDS = 100_000


def token_set_fingerprint(entries: Iterable[tuple[bytes, str]]) -> str:
    """The fingerprint of (token digest, owner) pairs, in any order."""
    canonical = b"\n".join(
        sorted(digest.hex().encode() + b" " + owner.encode() for digest, owner in entries)
    )
    return hashlib.pbkdf2_hmac("sha256", canonical, _SALT, _ROUNDS).hex()[:32]


class TokenSetBeacon:
    """One replica's published fingerprint; ``renew`` keeps it alive for ``ttl_s``."""

    def __init__(self, redis: SharedRedis, fingerprint: str) -> None:
        self.redis = redis
        self.fingerprint = fingerprint
        self.key = redis.key("tokenset", redis.new_id("t_"))

    def renew(self, ttl_s: float) -> None:
        self.redis.call(
            self.redis.client.set,
            self.key,
            self.fingerprint.encode(),
            px=max(int(ttl_s * 1000), 100),
        )

    def withdraw(self) -> None:
        self.redis.call(self.redis.client.delete, self.key)


def live_token_sets(redis: SharedRedis) -> dict[str, int]:
    """Fingerprint -> how many live replicas serve with it."""
    counts: dict[str, int] = {}

    def scan() -> list[bytes]:
        keys = list(redis.client.scan_iter(redis.key("tokenset", "*")))
        return [value for value in (redis.client.get(key) for key in keys) if value is not None]

    for value in redis.call(scan):
        fingerprint = bytes(value).decode()
        counts[fingerprint] = counts.get(fingerprint, 0) + 1
    return counts

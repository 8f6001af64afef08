"""``[state]``: where state for code lives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from codemode.config_model import ConfigModel, Hint, PositiveWholeNumber

__all__ = [
    "OWNER_MAX_BYTES",
    "OWNER_MAX_KEYS",
    "SESSION_MAX_BYTES",
    "SESSION_MAX_KEYS",
    "KvQuota",
    "StateSettings",
]

SESSION_MAX_BYTES = 32 << 20
SESSION_MAX_KEYS = 5_000
OWNER_MAX_BYTES = 64 << 20
OWNER_MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class KvQuota:
    """What one session (its ``kv``) and one owner (``shared``) may keep in the state store."""

    session_max_bytes: int = SESSION_MAX_BYTES
    session_max_keys: int = SESSION_MAX_KEYS
    owner_max_bytes: int = OWNER_MAX_BYTES
    owner_max_keys: int = OWNER_MAX_KEYS


class StateSettings(ConfigModel):
    """The short-term tier is in the gateway's memory unless ``redis_url`` names a
    Redis-compatible server; the durable tier is SQLite in ``gateway.state_dir``."""

    redis_url: Annotated[
        str | None, Hint(fix='write redis_url = "redis://127.0.0.1:6379/0", or leave it out')
    ] = None
    max_value_bytes: PositiveWholeNumber = 1 << 20
    # A session's own values (``kv``) without a ttl expire after this long, so the values of
    # sessions that never come back (a gateway stopped while they were open) do not pile up.
    session_ttl_s: PositiveWholeNumber = 7 * 24 * 3600
    # Quotas: what one session (kv) and one owner (shared) may keep, keys and values together.
    session_max_bytes: PositiveWholeNumber = SESSION_MAX_BYTES
    session_max_keys: PositiveWholeNumber = SESSION_MAX_KEYS
    owner_max_bytes: PositiveWholeNumber = OWNER_MAX_BYTES
    owner_max_keys: PositiveWholeNumber = OWNER_MAX_KEYS

    def quota(self) -> KvQuota:
        return KvQuota(
            self.session_max_bytes, self.session_max_keys, self.owner_max_bytes, self.owner_max_keys
        )

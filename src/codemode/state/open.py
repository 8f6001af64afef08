"""Open the state store a config asks for."""

from __future__ import annotations

from pathlib import Path

from codemode.settings.state import StateSettings
from codemode.state.sqlite import SQLiteStore
from codemode.state.store import KeyValueStore, MemoryStore
from codemode.state.tiered import TieredStore

__all__ = ["open_state_store"]


def open_state_store(settings: StateSettings, state_dir: Path) -> TieredStore:
    """Short tier in memory (or Redis, when configured) over SQLite in ``state_dir``."""
    durable = SQLiteStore(state_dir / "state.sqlite")
    short: KeyValueStore
    if settings.redis_url:
        from codemode.state.redis import RedisStore

        try:
            short = RedisStore(settings.redis_url)
        except BaseException:
            durable.close()
            raise
    else:
        short = MemoryStore()
    return TieredStore(short, durable)

"""State for code: values that outlive an execution (``from state import kv`` in the sandbox).

Two tiers, as the stores behind them: a short-term tier in memory or a Redis-compatible server
(most reads), and a durable tier written asynchronously (SQLite by default). With no Redis
configured an embedded default serves both tiers, so nothing needs a server.
"""

from codemode.state.store import KeyValueStore, MemoryStore, StoredValue
from codemode.state.tiered import TieredStore

__all__ = ["KeyValueStore", "MemoryStore", "StoredValue", "TieredStore"]

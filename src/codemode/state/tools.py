"""The tool calls behind ``from state import kv`` in the sandbox, answered on the host.

Two scopes: ``kv`` (this session; deleted when the session closes) and ``shared`` (every
session of the same owner). Values are JSON, at most ``max_value_bytes`` each; keys are short
strings. Each scope has a quota of bytes and keys (``KvQuota``). Owner names and session handles
are escaped in store keys, so no two owners share a key. These calls never leave the host and
need no grant from the catalog.
"""

from __future__ import annotations

import json
import time
from typing import Any

from codemode.errors import StateStoreError, ToolError
from codemode.state.quota import KvQuota, QuotaScope, escape_key_part
from codemode.state.store import KeyValueStore
from codemode.tools import ToolCall

__all__ = ["STATE_SERVER", "StateTools", "session_prefixes", "state_module_source"]

STATE_SERVER = "_state"
_MAX_KEY_CHARS = 256


def session_prefixes(session: str) -> tuple[str, str]:
    """Where one session's values and its quota counters live: both go when it closes."""
    part = escape_key_part(session)
    return f"s:{part}:", f"q:s:{part}:"


class StateTools:
    """A ``ToolInvoker`` for the ``_state`` server of one session."""

    def __init__(
        self,
        store: KeyValueStore,
        *,
        session: str,
        owner: str | None,
        max_value_bytes: int = 1 << 20,
        session_ttl_s: float | None = None,
        quota: KvQuota | None = None,
    ) -> None:
        self.store = store
        self.session = session
        self.owner = owner or "-"
        self.max_value_bytes = max_value_bytes
        self.session_ttl_s = session_ttl_s
        quota = quota or KvQuota()
        values, counters = session_prefixes(session)
        owner_part = escape_key_part(self.owner)
        self._scopes = {
            "session": QuotaScope(
                "this session",
                values,
                counters,
                quota.session_max_bytes,
                quota.session_max_keys,
                "session_max_keys",
                "session_max_bytes",
                session_ttl_s,
            ),
            "owner": QuotaScope(
                "this owner",
                f"o:{owner_part}:",
                f"q:o:{owner_part}:",
                quota.owner_max_bytes,
                quota.owner_max_keys,
                "owner_max_keys",
                "owner_max_bytes",
            ),
        }

    def session_prefix(self) -> str:
        return self._scopes["session"].prefix

    def _key(self, arguments: dict[str, Any]) -> tuple[str, QuotaScope]:
        key = arguments.get("key")
        if not isinstance(key, str) or not key or len(key) > _MAX_KEY_CHARS:
            raise ToolError(f"state: a key is a non-empty string of at most {_MAX_KEY_CHARS} chars")
        scope = self._scopes.get(str(arguments.get("scope", "session")))
        if scope is None:
            raise ToolError("state: scope is 'session' (kv) or 'owner' (shared)")
        return scope.prefix + key, scope

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        arguments = call.arguments
        key, scope = self._key(arguments)
        try:
            return self._run(call.tool, key, scope, arguments)
        except StateStoreError as error:
            raise ToolError(f"state: {error.message}", fix=error.fix) from None

    def _run(self, operation: str, key: str, scope: QuotaScope, arguments: dict[str, Any]) -> Any:
        store = self.store
        if operation == "get":
            found = store.get(key)
            if found is None:
                return {"found": False}
            return {"found": True, "value": json.loads(found.data)}
        if operation == "set":
            data = self._encode(arguments.get("value"))
            ttl = arguments.get("ttl")
            if ttl is not None and (not isinstance(ttl, int | float) or ttl <= 0):
                raise ToolError("state: ttl is a positive number of seconds, or None")
            if ttl is None and key.startswith(self.session_prefix()):
                ttl = self.session_ttl_s
            change = scope.charge(store, key, store.get(key), len(data))
            store.set(key, data, expires_at=time.time() + ttl if ttl else None)
            scope.record(store, *change)
            return None
        if operation == "delete":
            old = store.get(key)
            deleted = store.delete(key)
            if deleted and old is not None:
                scope.record(store, -1, -(len(key.encode()) + len(old.data)))
            return deleted
        if operation == "incr":
            by = arguments.get("by", 1)
            if not isinstance(by, int) or isinstance(by, bool):
                raise ToolError("state: incr(key, by) takes an integer `by`")
            old = store.get(key)
            added_keys, _ = scope.charge(store, key, old, len(str(by)))
            try:
                number = store.incr(key, by)
            except ValueError:
                raise ToolError("state: incr works only on integer values") from None
            size = len(str(number))
            added = size - len(old.data) if old is not None else size + len(key.encode())
            scope.record(store, added_keys, added)
            return number
        raise ToolError(f"state: no operation {operation!r}; use get, set, delete or incr")

    def _encode(self, value: Any) -> bytes:
        try:
            data = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as error:
            raise ToolError(
                f"state: values must be JSON (dict, list, str, int, float, bool, None): {error}"
            ) from None
        if len(data) > self.max_value_bytes:
            raise ToolError(
                f"state: a value is at most {self.max_value_bytes:,} bytes as JSON "
                f"(this one is {len(data):,}); keep large data in workspace files"
            )
        return data


def state_module_source() -> str:
    """The ``state`` module as the sandbox imports it (standard library only)."""
    return _MODULE


_MODULE = '''"""Values that outlive this execution.

    from state import kv, shared
    kv.set("cursor", 120)             # this session (gone when the session closes)
    kv.get("cursor", 0)               # -> 120
    shared.set("last_run", {"ok": True}, ttl=3600)   # every session of this owner; ttl in s
    shared.incr("runs")               # -> 1, 2, ...
    kv.delete("cursor")               # -> True when it existed
    keep("rows", "model")             # keep these variables if the sandbox is lost (pickled)

Values are JSON (dict, list, str, int, float, bool, None), at most 1 MB each.
"""

from servers._runtime import call_tool as _call

__all__ = ["kv", "shared", "Store", "keep"]


class Store:
    def __init__(self, scope):
        self._scope = scope

    def get(self, key, default=None):
        found = _call("_state", "get", {"scope": self._scope, "key": key})
        return found["value"] if found["found"] else default

    def set(self, key, value, ttl=None):
        _call("_state", "set", {"scope": self._scope, "key": key, "value": value, "ttl": ttl})

    def delete(self, key):
        return _call("_state", "delete", {"scope": self._scope, "key": key})

    def incr(self, key, by=1):
        return _call("_state", "incr", {"scope": self._scope, "key": key, "by": by})

    def __repr__(self):
        return "<state %s>" % ("kv (this session)" if self._scope == "session" else "shared")


kv = Store("session")
shared = Store("owner")


def keep(*names):
    """Checkpoint these variables with the session's files (pickled inside the sandbox), so
    they come back after a limit kill, a crash or a gateway restart."""
    return _call("_checkpoint", "keep", {"names": list(names)})
'''

"""The ``[audit]`` config table: rotation, retention and the per-session write budget.

```toml
[audit]
max_bytes = 67108864          # rotate the log file past this size (default 64 MiB)
rotate_after_days = 7         # ... or when its oldest row is older than this
retention_days = 90           # delete rotated files older than this
keep_files = 20               # and keep at most this many rotated files
events_per_session = 10000    # rows one session may write; past it, its calls are refused
repeat_window_s = 60          # identical refusals within this window become one counted row
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from codemode.errors import ConfigError

__all__ = ["AuditSettings"]


@dataclass(frozen=True, slots=True)
class AuditSettings:
    max_bytes: int = 64 * 1024 * 1024
    rotate_after_days: float = 7.0
    retention_days: float = 90.0
    keep_files: int = 20
    events_per_session: int = 10_000
    repeat_window_s: float = 60.0

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], source: str = "config") -> AuditSettings:
        if not isinstance(table, Mapping):
            raise ConfigError("must be a table", path=source, key="audit", fix="write [audit]")
        known = [item.name for item in fields(cls)]
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown key(s) {', '.join(map(repr, unknown))}",
                path=source,
                key=f"audit.{unknown[0]}",
                fix=f"use only {', '.join(known)}",
            )
        defaults = cls()
        values: dict[str, Any] = {}
        for name in known:
            value = table.get(name, getattr(defaults, name))
            whole = isinstance(getattr(defaults, name), int)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or (whole and not isinstance(value, int)) or value <= 0:
                raise ConfigError(
                    "must be a positive " + ("whole number" if whole else "number"),
                    path=source,
                    key=f"audit.{name}",
                    fix=f"write e.g. {name} = {getattr(defaults, name)}",
                )
            values[name] = value
        return cls(**values)

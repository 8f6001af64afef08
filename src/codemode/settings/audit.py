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
from typing import Annotated, Any

from pydantic import BeforeValidator

from codemode.config_model import (
    ConfigModel,
    PositiveNumber,
    PositiveWholeNumber,
    validate_section,
)

__all__ = ["AuditSettings"]


def _float(value: object) -> object:
    # A whole number where seconds or days are asked for is fine.
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


Amount = Annotated[PositiveNumber, BeforeValidator(_float)]


class AuditSettings(ConfigModel):
    max_bytes: PositiveWholeNumber = 64 * 1024 * 1024
    rotate_after_days: Amount = 7.0
    retention_days: Amount = 90.0
    keep_files: PositiveWholeNumber = 20
    events_per_session: PositiveWholeNumber = 10_000
    repeat_window_s: Amount = 60.0

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], source: str = "config") -> AuditSettings:
        """Build from the ``[audit]`` table (TOML) or the ``"audit"`` object (JSON)."""
        return validate_section(cls, table, source=source, prefix="audit")

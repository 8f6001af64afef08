"""``[state]``: where state for code lives."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["StateSettings"]


class StateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # A Redis-compatible server for the short-term tier ("redis://host:6379/0"); None keeps
    # the short tier in the gateway's memory. The durable tier is always SQLite in state_dir.
    redis_url: str | None = None
    max_value_bytes: int = Field(default=1 << 20, gt=0)

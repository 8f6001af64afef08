"""``SharedBudget``: a session's call budget counted in the shared store.

The check and the count are one Lua script (total, per tool, and a sliding minute kept as a
sorted set of call times from the server's clock), so two replicas can never both spend the
last unit, and a session that moves to another replica keeps what it spent.
"""

from __future__ import annotations

import secrets

from codemode.policy.budget import WINDOW_S, Budget, BudgetExceededError
from codemode.replicas.connection import SharedRedis
from codemode.settings.policy import BudgetSettings

__all__ = ["SharedBudget", "budget_keys"]

# KEYS: totals hash, recent zset. ARGV: tool, calls limit, tool limit, rate limit (-1: none),
# window ms, a unique member, ttl ms.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local total = tonumber(redis.call('HGET', KEYS[1], '') or '0')
local used = tonumber(redis.call('HGET', KEYS[1], 't:' .. ARGV[1]) or '0')
if tonumber(ARGV[2]) >= 0 and total >= tonumber(ARGV[2]) then return {1, 0} end
if tonumber(ARGV[3]) >= 0 and used >= tonumber(ARGV[3]) then return {2, 0} end
if tonumber(ARGV[4]) >= 0 and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {3, tonumber(oldest[2]) + window - now}
end
redis.call('HINCRBY', KEYS[1], '', 1)
redis.call('HINCRBY', KEYS[1], 't:' .. ARGV[1], 1)
redis.call('ZADD', KEYS[2], now, ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return {0, 0}
"""

_REFUND = """
if tonumber(redis.call('HGET', KEYS[1], 't:' .. ARGV[1]) or '0') <= 0 then return 0 end
redis.call('HINCRBY', KEYS[1], '', -1)
redis.call('HINCRBY', KEYS[1], 't:' .. ARGV[1], -1)
redis.call('ZPOPMAX', KEYS[2])
return 1
"""


def budget_keys(redis: SharedRedis, session: str) -> tuple[str, str]:
    return redis.key("budget", session), redis.key("budget", session, "recent")


class SharedBudget(Budget):
    def __init__(
        self, redis: SharedRedis, session: str, settings: BudgetSettings, *, ttl_s: float
    ) -> None:
        super().__init__(settings)
        self.redis = redis
        self._keys = list(budget_keys(redis, session))
        self._ttl_ms = max(int(ttl_s * 1000), 1000)
        self._acquire = redis.script(_ACQUIRE)
        self._refund = redis.script(_REFUND)

    @property
    def total(self) -> int:
        found = self.redis.call(self.redis.client.hget, self._keys[0], "")
        return int(found or 0)

    def used(self, name: str) -> int:
        found = self.redis.call(self.redis.client.hget, self._keys[0], "t:" + name)
        return int(found or 0)

    def acquire(self, name: str) -> None:
        settings = self.settings
        per_tool = self.limit_for(name)
        verdict, wait_ms = self._acquire(
            keys=self._keys,
            args=[
                name,
                -1 if settings.calls is None else settings.calls,
                -1 if per_tool is None else per_tool[1],
                -1 if settings.rate_per_minute is None else settings.rate_per_minute,
                int(WINDOW_S * 1000),
                secrets.token_hex(8),
                self._ttl_ms,
            ],
        )
        if verdict == 1:
            raise BudgetExceededError(
                "calls",
                f"this session has used all {settings.calls} tool calls of its budget",
                "raise policy.budget.calls in the config, or start a new session",
            )
        if verdict == 2 and per_tool is not None:
            key, limit = per_tool
            raise BudgetExceededError(
                "per_tool",
                f"this session has used all {limit} calls to {name} of its budget",
                f'raise policy.budget.per_tool."{key}" in the config, or start a new session',
            )
        if verdict == 3:
            raise BudgetExceededError(
                "rate_per_minute",
                f"this session made {settings.rate_per_minute} tool calls in the last minute, "
                "its rate limit",
                f"retry in {max(int(wait_ms), 0) / 1000:.0f} s, or raise "
                "policy.budget.rate_per_minute in the config",
            )

    def refund(self, name: str) -> None:
        self._refund(keys=self._keys, args=[name])

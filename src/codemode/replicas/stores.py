"""``RedisSessionStores``: vaults and budgets of sessions in the shared store."""

from __future__ import annotations

from codemode.policy.budget import Budget
from codemode.privacy.vault import Vault
from codemode.replicas.budget import SharedBudget, budget_keys
from codemode.replicas.connection import SharedRedis
from codemode.replicas.sealing import PlainSealer, Sealer
from codemode.replicas.vault import SharedVault, vault_keys
from codemode.settings.policy import BudgetSettings

__all__ = ["RedisSessionStores"]


class RedisSessionStores:
    def __init__(self, redis: SharedRedis, *, ttl_s: float, sealer: Sealer | None = None) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        # Vault entries are sealed; budgets are counts per tool name, kept plain.
        self.sealer = sealer or PlainSealer()

    def vault(self, session: str) -> Vault:
        return SharedVault(self.redis, session, ttl_s=self.ttl_s, sealer=self.sealer)

    def budget(self, session: str, settings: BudgetSettings) -> Budget:
        return SharedBudget(self.redis, session, settings, ttl_s=self.ttl_s)

    def keys(self, session: str) -> tuple[str, ...]:
        """Every key a session's vault and budget use (deleted when it ends for good)."""
        return (*vault_keys(self.redis, session), *budget_keys(self.redis, session))

"""Where a session's vault and budget live: the seam, and the in-process default.

One gateway keeps them in memory (``LocalSessionStores``). Gateway replicas that share a
session keep them in a shared store (``codemode.replicas.stores.RedisSessionStores``), so a
token minted through one replica resolves through another and a budget is spent once.
"""

from __future__ import annotations

from typing import Protocol

from codemode.policy.budget import Budget
from codemode.privacy.vault import Vault
from codemode.settings.policy import BudgetSettings

__all__ = ["LocalSessionStores", "SessionStores"]


class SessionStores(Protocol):
    def vault(self, session: str) -> Vault:
        """The session's vault (loaded with what it already holds)."""
        ...

    def budget(self, session: str, settings: BudgetSettings) -> Budget: ...


class LocalSessionStores:
    """In this process: a new vault and budget per session, gone when it closes."""

    def vault(self, session: str) -> Vault:
        return Vault()

    def budget(self, session: str, settings: BudgetSettings) -> Budget:
        return Budget(settings)

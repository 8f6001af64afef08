"""Token counts (o200k, offline through ``toktok``). The ledger built on them (what a catalog
would cost as plain MCP tools, against codemode's tool surface) is ``codemode.ledger``."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ENCODING", "count_tokens", "count_tokens_many"]

ENCODING = "o200k_base"


def count_tokens_many(texts: Sequence[str], encoding: str = ENCODING) -> list[int]:
    import toktok

    return [int(n) for n in toktok.batch_count(list(texts), encoding)]


def count_tokens(text: str, encoding: str = ENCODING) -> int:
    return count_tokens_many([text], encoding)[0]

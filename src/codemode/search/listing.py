"""A whole small catalog as one search answer, for prompts that can list every function.

With a handful of tools a search round costs more than listing them all: the agent's system
prompt then carries the listing (what a default search answer shows for each function) and
the model can write code at once. Past ``max_tokens`` the catalog is not small: search it.
"""

from __future__ import annotations

from collections.abc import Sequence

from codemode.search.base import hit_from_document
from codemode.search.documents import tool_documents
from codemode.search.render import render_answer
from codemode.tokens import count_tokens
from codemode.tools import ToolSpec

__all__ = ["SMALL_CATALOG_TOKENS", "small_catalog_listing"]

# About what one default search answer costs: listing more than that is no saving.
SMALL_CATALOG_TOKENS = 500
# A function's line and summary cost at least this many tokens: more tools than
# max_tokens / this cannot fit, and rendering them all would be work for nothing.
_MIN_TOKENS_PER_TOOL = 8


def small_catalog_listing(
    specs: Sequence[ToolSpec], max_tokens: int = SMALL_CATALOG_TOKENS
) -> str | None:
    """Every function of ``specs`` as a search answer lists it, or None when that text would
    cost more than ``max_tokens`` o200k tokens (or there are no tools)."""
    if not specs or len(specs) > max_tokens // _MIN_TOKENS_PER_TOOL:
        return None
    hits = [hit_from_document(document, 0.0) for document in tool_documents(specs)]
    hits.sort(key=lambda hit: (hit.module, hit.function))
    text = render_answer(hits)
    return text if count_tokens(text) <= max_tokens else None

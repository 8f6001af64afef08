"""Structured content of the gateway's answers: the facts the text shows, and no more.

Clients that hand structured content to the model pay for every token of it, so it carries
what the text carries, as data (measured beside the text in ``codemode tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["search_structured"]


def search_structured(
    hits: Sequence[Mapping[str, Any]], detail: str, *, more: Sequence[str] = ()
) -> dict[str, Any]:
    """A search answer as data: each hit's ``python_name``, and at the ``summary`` and
    ``full`` levels its ``signature`` and ``summary`` (scores, HTTP routes and upstream
    names stay out: the text does not show them); ``more``: the further candidates the text
    names, as ``{module: [function, ...]}`` in rank order."""
    lean: list[dict[str, Any]] = []
    for hit in hits:
        item: dict[str, Any] = {"python_name": hit["python_name"]}
        if hit.get("kind", "tool") != "tool":  # a saved skill, marked as the text marks it
            item["kind"] = hit["kind"]
            if hit.get("stale"):
                item["stale"] = hit["stale"]  # why: the tool that changed
        if detail != "name":
            item["signature"] = hit["signature"]
            if hit.get("summary"):
                item["summary"] = hit["summary"]
        lean.append(item)
    if not more:
        return {"hits": lean}
    by_module: dict[str, list[str]] = {}  # as the text groups them: each module named once
    for name in more:
        module, _, function = name.partition(".")
        by_module.setdefault(module, []).append(function)
    return {"hits": lean, "more": by_module}

"""Local JSON references (``#/components/schemas/Pet``): one resolver for every caller."""

from __future__ import annotations

from typing import Any

__all__ = ["MISSING", "resolve_local_ref"]

# Returned when a reference points nowhere (``None`` is a value a document may hold).
MISSING: Any = object()


def resolve_local_ref(root: Any, ref: str) -> Any:
    """The node ``ref`` (a local reference, ``#`` then a JSON pointer) names in ``root``, or
    ``MISSING`` when it points nowhere or is not local (``other.json#/...``)."""
    if not ref.startswith("#"):
        return MISSING
    node = root
    pointer = ref[1:]
    if not pointer:
        return node
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node

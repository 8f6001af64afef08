"""Queries that name functions: ``stripe.post_refunds`` (or several, separated by commas or
spaces; ``servers.`` and a trailing ``(...)`` allowed) answer with exactly those tools, so the
agent can ask for any candidate of an earlier answer in full."""

from __future__ import annotations

import re
from collections.abc import Sequence

from codemode.search.hit import Hit

__all__ = ["NameLookup", "names_query"]

_NAME = re.compile(r"(?:servers\.)?([A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*)(?:\(.*\))?")
_SEPARATORS = re.compile(r"[\s,;]+")


def names_query(query: str) -> int:
    """How many Python names ``query`` consists of (it names, rather than describes, what it
    wants), or 0 when it is not names only."""
    words = [word for word in _SEPARATORS.split(query.strip()) if word]
    return len(words) if all(_NAME.fullmatch(word) for word in words) else 0


class NameLookup:
    """Tools by Python name, kept in step with a growing list of entries."""

    def __init__(self) -> None:
        self._by_name: dict[str, Hit] = {}
        self._seen = 0

    def find(self, query: str, entries: Sequence[Hit]) -> list[Hit] | None:
        """The tools ``query`` names, in its order; None unless every word is a known name."""
        words = [word for word in _SEPARATORS.split(query.strip()) if word]
        if not words or any("." not in word for word in words):
            return None  # the usual case, decided without touching the entries
        if self._seen != len(entries):
            if self._seen > len(entries):
                self._by_name, self._seen = {}, 0
            from codemode.stubs.naming import code_name

            for entry in entries[self._seen :]:
                self._by_name.setdefault(entry.python_name, entry)
                # Also as code calls it: ``time_server.convert_time`` for a ``time`` server.
                self._by_name.setdefault(f"{code_name(entry.module)}.{entry.function}", entry)
            self._seen = len(entries)
        found: list[Hit] = []
        for word in words:
            match = _NAME.fullmatch(word)
            hit = self._by_name.get(match.group(1)) if match else None
            if hit is None:
                return None
            if hit not in found:
                found.append(hit)
        return found

"""The per-session vault: sensitive values and the tokens that stand for them, host side only.

A value always gets the same token within a session (``<EMAIL_1>``), whatever detector or field
rule found it and whichever tool returned it. Token names that already occur in data the vault
has seen (``reserve``) are never issued, so a token can never be confused with text that was
there before. Nothing is written anywhere; ``wipe`` forgets everything.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = ["TOKEN_PATTERN", "TokenSource", "Vault", "VaultEntry"]

#: What a token looks like: ``<KIND_N>`` with an upper-case kind.
TOKEN_PATTERN = re.compile(r"<([A-Z][A-Z0-9_]*)_([1-9]\d{0,8})>")
_KIND = re.compile(r"[A-Z][A-Z0-9_]*")
# Kinds checked already: a MB of text can issue thousands of tokens of the same few kinds.
_GOOD_KINDS: set[str] = set()
_GOOD_KINDS_MAX = 1024

#: Sources kept per token for reports; the set of origin servers is always complete.
_MAX_SOURCES = 8

VaultValue = str | int | float


def _check_kind(kind: str) -> None:
    if not _KIND.fullmatch(kind):
        raise ValueError(f"token kind {kind!r} must be upper-case letters, digits and '_'")
    if len(_GOOD_KINDS) < _GOOD_KINDS_MAX:  # kinds named after fields can be many
        _GOOD_KINDS.add(kind)


@dataclass(frozen=True, slots=True)
class TokenSource:
    """Where a value was first seen: ``server``/``tool`` and the field path inside the result."""

    server: str
    tool: str
    path: str

    def describe(self) -> str:
        where = f"{self.server}.{self.tool}" if self.tool else self.server
        return f"{where} at {self.path}" if self.path else where


#: How the vault looks a value up: a text as itself, a number with its type (``1`` and
#: ``1.0`` and ``"1"`` are three values; a tuple never equals a text).
_ValueKey = str | tuple[type, VaultValue]


def _key(value: VaultValue) -> _ValueKey:
    # A text, most values: no tuple of 56 bytes kept for each of a CRM's 90,000 values.
    return value if type(value) is str else (type(value), value)


#: A source as an entry keeps it: ``(server, tool, path)``.
SeenAt = tuple[str, str, str]
_NOWHERE: frozenset[str] = frozenset()


@dataclass(slots=True)
class VaultEntry:
    """A value and its token. A result of records adds thousands at once, which every full
    collection of the cyclic collector walks: the sets of servers are shared by the entries
    that have the same (``Vault._shared``) and replaced, not changed, and the sources are
    tuples of text, which the collector stops walking after one look. Only the entry is left
    for it to walk (6.5 objects an entry before: 230 ms a full collection of 80,000)."""

    token: str
    kind: str
    value: VaultValue
    #: Servers the value came from, except those that only returned it after a call gave it.
    origins: frozenset[str] = _NOWHERE
    #: Servers a detokenized call has sent the value to.
    delivered: frozenset[str] = _NOWHERE
    #: Where the value was seen (at most ``_MAX_SOURCES``), as ``sources`` gives them.
    seen_at: tuple[SeenAt, ...] = ()

    @property
    def sources(self) -> list[TokenSource]:
        """Where the value was seen, first first (at most ``_MAX_SOURCES``)."""
        return [TokenSource(*place) for place in self.seen_at]

    @sources.setter
    def sources(self, sources: Iterable[TokenSource]) -> None:
        self.seen_at = tuple((s.server, s.tool, s.path) for s in sources)[:_MAX_SOURCES]


class Vault:
    """Value <-> token map for one session. Thread-safe; lives and dies with the session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, VaultEntry] = {}
        self._by_value: dict[_ValueKey, VaultEntry] = {}
        self._counters: dict[str, int] = {}
        self._reserved: set[str] = set()
        # Every server a held value came from: what the flow rules judge a call by.
        self._origins: set[str] = set()
        # One frozenset of servers for all entries with the same (``_shared``).
        self._sets: dict[frozenset[str], frozenset[str]] = {_NOWHERE: _NOWHERE}
        self._version = 0
        # The longest text value held: a longer text is no value (no hash of a MB to say so).
        self._longest = 0

    def __len__(self) -> int:
        return len(self._by_token)

    @property
    def version(self) -> int:
        """Grows whenever an entry is added, a server is first among the values' origins, or
        the vault is wiped (for caches and checks built on it)."""
        return self._version

    def origins(self) -> frozenset[str]:
        """Every server a value the vault holds came from."""
        with self._lock:
            return frozenset(self._origins)

    def token_for(self, kind: str, value: VaultValue, source: TokenSource) -> str:
        """The token for ``value``, issued now if new; ``source`` is remembered either way."""
        if kind not in _GOOD_KINDS:
            _check_kind(kind)
        key = _key(value)
        with self._lock:
            entry = self._by_value.get(key)
            if entry is None:
                entry = VaultEntry(self._next_token(kind), kind, value)
                self._keep(entry)
                self._version += 1
            self._saw(entry, source.server, (source.server, source.tool, source.path))
            return entry.token

    def _saw(self, entry: VaultEntry, server: str, place: SeenAt) -> bool:
        """``entry``'s value came from ``server`` at ``place`` (call with the lock held);
        whether ``server`` is an origin of it."""
        origin = server not in entry.delivered
        if origin and server not in entry.origins:
            entry.origins = self._shared(entry.origins | {server})
            self._note_origin(server)
        seen = entry.seen_at
        if len(seen) < _MAX_SOURCES and place not in seen:
            entry.seen_at = (*seen, place)
        return origin

    def _shared(self, servers: frozenset[str]) -> frozenset[str]:
        """The vault's one frozenset equal to ``servers`` (call with the lock held)."""
        return self._sets.setdefault(servers, servers)

    def tokens_for(self, items: Iterable[tuple[str, VaultValue]], source: TokenSource) -> list[str]:
        """``token_for`` of each ``(kind, value)`` in turn, under one lock and without a call
        per value (a MB of text can hold thousands of values)."""
        tokens: list[str] = []
        by_value = self._by_value
        server = source.server
        place = (server, source.tool, source.path)
        with self._lock:
            for kind, value in items:
                if kind not in _GOOD_KINDS:
                    _check_kind(kind)
                key = _key(value)
                entry = by_value.get(key)
                if entry is None:
                    entry = VaultEntry(self._next_token(kind), kind, value)
                    self._keep(entry)
                    self._version += 1
                self._saw(entry, server, place)
                tokens.append(entry.token)
        return tokens

    def _note_origin(self, server: str) -> None:
        """``server`` is an origin of a held value (call with the lock held). The first time,
        the version grows: a flow check that relied on the origins before is out of date."""
        if server not in self._origins:
            self._origins.add(server)
            self._version += 1

    def _keep(self, entry: VaultEntry) -> None:
        """Index a new entry (call with the lock held)."""
        value = entry.value
        entry.origins = self._shared(entry.origins)
        entry.delivered = self._shared(entry.delivered)
        self._by_value[_key(value)] = entry
        self._by_token[entry.token] = entry
        if isinstance(value, str) and len(value) > self._longest:
            self._longest = len(value)
        for server in entry.origins:  # an entry loaded with its origins (a shared vault)
            self._note_origin(server)

    def seen_again(self, value: VaultValue, source: Callable[[], TokenSource]) -> str | None:
        """The token of a value the vault holds (recording ``source()``), else None."""
        if isinstance(value, str) and len(value) > self._longest:
            return None
        with self._lock:
            entry = self._by_value.get(_key(value))
        if entry is None:
            return None
        return self.token_for(entry.kind, value, source())

    def _next_token(self, kind: str) -> str:
        number = self._counters.get(kind, 0)
        while True:
            number += 1
            token = f"<{kind}_{number}>"
            if token not in self._reserved:
                self._counters[kind] = number
                return token

    def mark_delivered(self, token: str, server: str) -> None:
        """``server`` was sent the value: if it returns it, it is not a new origin."""
        with self._lock:
            entry = self._by_token.get(token)
            if entry is not None and server not in entry.delivered:
                entry.delivered = self._shared(entry.delivered | {server})

    def reserve(self, token: str) -> None:
        """Never issue ``token``: it occurs in data as it came from a tool."""
        with self._lock:
            self._reserved.add(token)

    def issued(self, token: str) -> bool:
        return token in self._by_token

    def lookup(self, token: str) -> VaultEntry | None:
        with self._lock:
            return self._by_token.get(token)

    def value_of(self, token: str) -> VaultValue | None:
        entry = self.lookup(token)
        return None if entry is None else entry.value

    @property
    def longest_text(self) -> int:
        """The length of the longest text value held (0 after a wipe)."""
        return self._longest

    def token_of(self, value: VaultValue) -> str | None:
        if isinstance(value, str) and len(value) > self._longest:
            return None
        with self._lock:
            entry = self._by_value.get(_key(value))
            return None if entry is None else entry.token

    def entries(self) -> Iterator[VaultEntry]:
        """A snapshot of the entries, oldest first."""
        with self._lock:
            snapshot = list(self._by_token.values())
        return iter(snapshot)

    def entries_after(self, seen: int) -> tuple[bool, list[VaultEntry]]:
        """What an index of the first ``seen`` entries lacks, oldest first, without copying
        them all: ``(False, the newer ones)``; or ``(True, every entry)`` when the vault was
        wiped since (it holds fewer), and the index must start again."""
        with self._lock:
            if len(self._by_token) < seen:
                return True, list(self._by_token.values())
            return False, list(itertools.islice(self._by_token.values(), seen, None))

    def wipe(self) -> None:
        """Forget every value, token and reservation."""
        with self._lock:
            self._by_token.clear()
            self._by_value.clear()
            self._counters.clear()
            self._reserved.clear()
            self._origins.clear()
            self._sets = {_NOWHERE: _NOWHERE}
            self._version += 1
            self._longest = 0

    def __repr__(self) -> str:  # never show values
        return f"<Vault: {len(self._by_token)} tokens>"

"""What an owner's calls have shown of each hidden value, across all of the owner's sessions.

Each session has a vault of its own, so the same address is ``<EMAIL_1>`` in one session and
``<EMAIL_4>`` in the next; but a probe spread over many sessions of one owner (a new session
for each guess) rebuilds the same value. The oracle guard therefore keeps what probes showed,
and which pieces went where the flow rules forbid, in a ``ProbeLedger`` per owner, keyed by
the value's letters and digits (its skeleton, the positions pieces are counted in), not by
the session's token. One gateway process keeps one ledger per owner (replicas each keep
their own); sessions without an owner share one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from codemode.privacy.pieces import Piece

__all__ = ["ProbeLedger", "ProbeLedgers", "ValueTrack"]

K = TypeVar("K")
V = TypeVar("V")

#: Values tracked per owner (the least recently probed are forgotten first).
MAX_VALUES = 4096
#: Owners tracked per process.
MAX_OWNERS = 1024


@dataclass
class ValueTrack:
    """One hidden value: the positions oracle calls showed and the pieces they carried, and
    the positions sent to servers its flow rules forbid, and which."""

    probed: set[int] = field(default_factory=set)
    probes: set[Piece] = field(default_factory=set)
    sent: set[int] = field(default_factory=set)
    sent_to: set[str] = field(default_factory=set)


class ProbeLedger:
    """Thread-safe through ``lock``, which callers hold while they read and update tracks."""

    def __init__(self, max_values: int = MAX_VALUES) -> None:
        self.lock = threading.Lock()
        self._max_values = max_values
        self._tracks: OrderedDict[str, ValueTrack] = OrderedDict()

    def track(self, skeleton: str) -> ValueTrack:
        """The value's track, made when first asked for (hold ``lock``)."""
        return _recent(self._tracks, skeleton, ValueTrack, self._max_values)

    def __len__(self) -> int:
        return len(self._tracks)


class ProbeLedgers:
    """One ledger per owner, shared by the owner's sessions in this process."""

    def __init__(self, max_owners: int = MAX_OWNERS) -> None:
        self._lock = threading.Lock()
        self._max_owners = max_owners
        self._ledgers: OrderedDict[str, ProbeLedger] = OrderedDict()

    def for_owner(self, owner: str | None) -> ProbeLedger:
        key = owner or ""
        with self._lock:
            return _recent(self._ledgers, key, ProbeLedger, self._max_owners)


def _recent(items: OrderedDict[K, V], key: K, make: Callable[[], V], limit: int) -> V:
    """``items[key]``, made when missing, as the most recent; the oldest go past ``limit``."""
    item = items.get(key)
    if item is None:
        item = items[key] = make()
        if len(items) > limit:
            items.popitem(last=False)
    else:
        items.move_to_end(key)
    return item

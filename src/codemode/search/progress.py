"""The stages of an index build, as one percentage and as lines on stderr.

``build_index`` and ``LiveIndex`` report ``(stage, percent)``: "lexical" (the keyword table),
"embedding" (the tool vectors: the long part on a first build), "ready". A build in two stages
reports the vectors' percentage over both, named by what is being embedded: "embedding" while
the prose view is (semantic answers once it is done), then "names" while the names view is
added, then "embedding 100%" once all are. ``overall_percent`` folds
them into one number for MCP progress notifications; ``StageLines`` prints them for a person.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

__all__ = ["STAGE_SHARES", "StageLines", "overall_percent"]

# Where each stage starts, and how much of the whole it is (embedding dominates a first build;
# "names" is its second stage, on the same scale).
STAGE_SHARES = {
    "starting": (0.0, 0.0),
    "lexical": (0.0, 5.0),
    "embedding": (5.0, 95.0),
    "names": (5.0, 95.0),
}


def overall_percent(stage: str, percent: float) -> float:
    """The whole build's percentage for ``percent`` of ``stage`` done."""
    if stage == "ready":
        return 100.0
    start, share = STAGE_SHARES.get(stage, (0.0, 0.0))
    return round(start + share * max(0.0, min(percent, 100.0)) / 100.0, 1)


class StageLines:
    """A progress listener that prints ``codemode: search index: embedding 40%`` lines: one
    when a stage starts, then one per ``step`` percent, and one when the index is ready.
    Safe to call from the building thread."""

    def __init__(self, stream: TextIO | None = None, *, step: float = 10.0) -> None:
        self._stream = stream
        self._step = step
        self._last: tuple[str, float] | None = None
        self._lock = threading.Lock()

    def __call__(self, stage: str, percent: float) -> None:
        with self._lock:
            last = self._last
            if (
                last is not None
                and last[0] == stage
                and percent < 100.0
                and (percent - last[1] < self._step)
            ):
                return
            if last == (stage, percent):
                return
            self._last = (stage, percent)
        stream = self._stream or sys.stderr
        print(f"codemode: search index: {stage} {percent:.0f}%", file=stream, flush=True)

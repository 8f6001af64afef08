"""A session's life cycle: the states it can be in and the moves between them.

``Session`` holds its state and moves it only through its own methods (``begin``, ``pause``,
``resume``, ``complete``, ``cancel``, ``stopped``, ``release``, ``close``); a move its state
does not allow is refused with ``SessionStateError``.
"""

from __future__ import annotations

import enum

from codemode.errors import SessionStateError

__all__ = ["AFTER_CLOSE", "LEGAL", "Life", "refusal"]


class Life(enum.Enum):
    # No execution runs; the sandbox is warm.
    IDLE = "idle"
    # An execution runs.
    RUNNING = "running"
    # An execution waits at a tool call for a human's decision.
    PAUSED = "paused_for_approval"
    # The execution's caller cancelled or went away: its code is stopping.
    CANCELLED = "cancelled"
    # Idle, and the sandbox was given back (checkpointed); the next execution restores it.
    RELEASED = "released"
    # Closed for good.
    CLOSED = "closed"


# For one execution at a time: move -> the states it may start from. Executions may overlap
# (a second one waits for the sandbox while the first runs or stops), so ``Session`` counts
# them: ``complete`` and ``cancel`` need a running execution that is not the paused one;
# ``stopped`` (a cancelled execution ended) needs a cancelled one still stopping.
LEGAL: dict[str, frozenset[Life]] = {
    "begin": frozenset({Life.IDLE, Life.RELEASED, Life.RUNNING, Life.CANCELLED}),
    "pause": frozenset({Life.RUNNING}),
    "resume": frozenset({Life.PAUSED}),
    "complete": frozenset({Life.RUNNING}),
    "cancel": frozenset({Life.RUNNING}),
    "stopped": frozenset({Life.CANCELLED}),
    "release": frozenset({Life.IDLE}),
    "close": frozenset(set(Life) - {Life.CLOSED}),
}

# What an execution reports about itself can come after its session was closed under it (a
# quota refusal, a shutdown): such a report changes nothing and is not an error.
AFTER_CLOSE = frozenset({"pause", "complete", "cancel", "stopped"})

_WHY: dict[Life, tuple[str, str]] = {
    Life.IDLE: ("no execution is running", "run code in the session first"),
    Life.RUNNING: (
        "it is running code now",
        "wait for that execution's result (or cancel it), or use another session",
    ),
    Life.PAUSED: (
        "it is paused, waiting for an approval",
        "call approve with that approval id (allow true or false) first",
    ),
    Life.CANCELLED: (
        "its execution was cancelled and is stopping",
        "run the next execution: it starts once the cancelled one has stopped",
    ),
    Life.RELEASED: ("its sandbox was released while idle", "run code: it is restored first"),
    Life.CLOSED: ("it is closed", "start a new session"),
}


def refusal(move: str, state: Life, handle: str, detail: str = "") -> SessionStateError:
    """The error for ``move`` asked of a session in ``state``: why not, and what to do."""
    why, fix = _WHY[state]
    return SessionStateError(
        f"session {handle[:12]!r} cannot {move}: {why}{detail}", fix=fix, state=state.value
    )

"""Hidden values on their way to another server: the seam between the policy and the privacy
wrapper.

The privacy wrapper decides each flow (``codemode.privacy.flows``) before the policy asks
anything: a refused flow raises at once, and a flow that needs the human comes back as a
``FlowAsk`` that the policy folds into the call's one approval. Once approved, the policy runs
the call inside ``flows_approved(tokens)`` so that the privacy wrapper lets exactly those
values through.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from codemode.tools import ToolCall

__all__ = ["FlowAsk", "FlowGate", "approved_tokens", "flows_approved"]


@dataclass(frozen=True, slots=True)
class FlowAsk:
    """Values a call would send to a tool that may reach the outside world."""

    # One line for the approval: which values go where, and the config line that allows it.
    reason: str
    # Origin server -> the tokens of its values that the call carries (shown to the human).
    values: Mapping[str, tuple[str, ...]]

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(self.values)

    @property
    def tokens(self) -> frozenset[str]:
        return frozenset(token for tokens in self.values.values() for token in tokens)


# Raises a ``ToolError`` for a flow the config forbids; None when nothing needs asking.
FlowGate = Callable[[ToolCall], FlowAsk | None]

_approved: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "codemode_flows_approved", default=frozenset()
)


@contextlib.contextmanager
def flows_approved(tokens: frozenset[str]) -> Iterator[None]:
    """Inside this block, the human has allowed these tokens to reach this call's tool."""
    reset = _approved.set(tokens)
    try:
        yield
    finally:
        _approved.reset(reset)


def approved_tokens() -> frozenset[str]:
    return _approved.get()

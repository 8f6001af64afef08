"""The flow decision: may a value tokenized from one server reach another server's tool?

With no ``[privacy.flows]`` entry for the source (and no ``"*"`` entry), hidden values may go
to any configured tool that declares ``openWorldHint: false`` (it reaches only its own
server's data), and a tool that may reach the outside world (``openWorldHint`` true, or no
annotations) gets them only if the human allows it, in the same approval that shows the call.
An entry in ``[privacy.flows]`` is the owner's decision and is applied as written: a listed
destination is allowed without asking, any other is refused before anything is asked, and
the refusal names the line that would allow it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from codemode.policy.flowgate import FlowAsk
from codemode.privacy.settings import DEFAULT_FLOW_KEY, PrivacySettings
from codemode.privacy.tokenizer import OUTPUT_SOURCE
from codemode.privacy.vault import VaultEntry

__all__ = ["FlowAction", "FlowRefusal", "allowing_line", "decide_flows", "flow_action"]

FlowAction = Literal["allow", "ask", "deny"]
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_LISTED_TOKENS = 3
_LINES = 2


def flow_action(
    settings: PrivacySettings, origin: str, destination: str, *, closed_world: bool
) -> FlowAction:
    if origin in (OUTPUT_SOURCE, destination):
        return "allow"
    if origin in settings.flows or DEFAULT_FLOW_KEY in settings.flows:
        return "allow" if settings.may_flow(origin, destination) else "deny"
    return "allow" if closed_world else "ask"


def allowing_line(settings: PrivacySettings, origin: str, destination: str) -> str:
    """The config line that lets ``origin``'s data reach ``destination``."""
    targets, _key = settings.flow_targets(origin)
    listed = ", ".join(json.dumps(t) for t in dict.fromkeys((origin, *targets, destination)))
    key = origin if _BARE_KEY.fullmatch(origin) else json.dumps(origin)
    return f"[privacy.flows] {key} = [{listed}]"


@dataclass(frozen=True, slots=True)
class FlowRefusal:
    """The first value the config keeps from ``destination``."""

    entry: VaultEntry
    origin: str
    destination: str


def decide_flows(
    settings: PrivacySettings,
    entries: Iterable[VaultEntry],
    destination: str,
    tool: str,
    *,
    closed_world: bool,
) -> FlowRefusal | FlowAsk | None:
    """A refusal if the config forbids one of the flows, else what the human must allow."""
    asks: dict[str, list[str]] = {}
    for entry in entries:
        for origin in sorted(entry.origins):
            action = flow_action(settings, origin, destination, closed_world=closed_world)
            if action == "deny":
                return FlowRefusal(entry, origin, destination)
            if action == "ask" and entry.token not in asks.setdefault(origin, []):
                asks[origin].append(entry.token)
    if not asks:
        return None
    parts = []
    for origin, tokens in asks.items():
        shown = ", ".join(tokens[:_LISTED_TOKENS])
        more = f" and {len(tokens) - _LISTED_TOKENS} more" if len(tokens) > _LISTED_TOKENS else ""
        parts.append(f"{shown}{more} from {origin}")
    origins = list(asks)
    lines = " and ".join(allowing_line(settings, o, destination) for o in origins[:_LINES])
    if len(origins) > _LINES:
        lines += f" and a line for each of {', '.join(origins[_LINES:])}"
    reason = (
        f"it sends {'; '.join(parts)} to {destination}.{tool}, which may reach the outside "
        f"world; always allowed with {lines}"
    )
    return FlowAsk(reason, {origin: tuple(tokens) for origin, tokens in asks.items()})

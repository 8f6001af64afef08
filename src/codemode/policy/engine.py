"""Deciding whether one tool call may run: allow, deny or ask a human.

The order: the first explicit rule that matches; then read-only mode (a tool not marked
read-only is denied); then the default for destructive tools; then allow. Because rules come
first, an explicit ``allow`` rule can let a write tool through in read-only mode.

An MCP tool's hints follow the MCP spec's defaults: a tool that declares no ``readOnlyHint`` is
not read-only, and one that declares no ``destructiveHint`` (and is not read-only) is
destructive, so it asks under the default policy. A server's ``annotations_default`` setting
fills in left-out hints before they reach here; ``read_only_tools`` marks single tools.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from codemode.policy.settings import Action, PolicySettings
from codemode.tools import ToolCall, ToolSpec

__all__ = ["Decision", "Policy", "SpecLookup", "matches_any"]

SpecLookup = Callable[[str, str], "ToolSpec | None"]

_READ_ONLY_METHODS = frozenset({"get", "head", "options"})


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` ("server.tool") matches one of the globs (case-sensitive)."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    # One sentence for people and the model: why, and how to change it.
    reason: str
    # The rule that decided ("policy.rules[0]"), or None for a default.
    rule: str | None = None


class Policy:
    """Decides calls from ``PolicySettings``; ``specs_lookup(server, tool)`` finds a tool's spec."""

    def __init__(self, settings: PolicySettings, specs_lookup: SpecLookup | None = None) -> None:
        self.settings = settings
        self.specs_lookup = specs_lookup

    def spec_for(self, call: ToolCall) -> ToolSpec | None:
        if self.specs_lookup is None:
            return None
        try:
            return self.specs_lookup(call.server, call.tool)
        except Exception:  # noqa: BLE001 - an unknown tool has no spec; the call fails later
            return None

    def decide(self, call: ToolCall, spec: ToolSpec | None = None) -> Decision:
        """The decision for ``call``; without ``spec`` the lookup given at construction is used."""
        if spec is None:
            spec = self.spec_for(call)
        name = f"{call.server}.{call.tool}"
        settings = self.settings
        for rule in settings.rules:
            if matches_any(name, rule.tools):
                because = f" ({rule.reason})" if rule.reason else ""
                return Decision(
                    rule.action,
                    f"{name} matches {rule.label} (action {rule.action!r}){because}",
                    rule.label,
                )
        if settings.mode == "read_only" and not self.is_read_only(name, spec):
            return Decision(
                "deny",
                f"policy mode is 'read_only' and {name} is not marked read-only; to allow it, "
                f'add it to policy.read_only_tools, add a rule with action "allow", or set '
                f'mode = "default"',
            )
        if settings.destructive != "allow" and self.is_destructive(name, spec):
            assert spec is not None  # no spec is never destructive
            why = (
                "declares no annotations, so it counts as destructive (the MCP default)"
                if spec.destructive is None and spec.source == "mcp"
                else "is marked destructive"
            )
            return Decision(
                settings.destructive,
                f"{name} {why} and policy.destructive is {settings.destructive!r}; [policy] "
                "read_only_tools, a rule or the server's annotations_default changes that",
            )
        return Decision("allow", f"{name} is allowed by default")

    def is_read_only(self, name: str, spec: ToolSpec | None) -> bool:
        if matches_any(name, self.settings.read_only_tools):
            return True
        if spec is None:
            return False
        if spec.read_only is not None:
            return spec.read_only
        return spec.source == "openapi" and (spec.method or "").lower() in _READ_ONLY_METHODS

    def is_destructive(self, name: str, spec: ToolSpec | None) -> bool:
        if spec is None or spec.read_only or matches_any(name, self.settings.read_only_tools):
            return False  # MCP: destructiveHint means something only when not read-only
        if spec.destructive is not None:
            return spec.destructive
        if spec.source == "mcp":
            return True  # the MCP spec's default destructiveHint
        return spec.source == "openapi" and (spec.method or "").lower() == "delete"

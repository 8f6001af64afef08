"""``OracleGuard``: limits on tools that can be used to rebuild hidden values one guess at a time.

A tool that answers yes/no or substring questions (a search, an "exists" check) is an oracle:
code that holds only ``<EMAIL_1>`` can still ask "is there a contact whose e-mail starts with
``m``? with ``ma``?" and rebuild the address in a few hundred calls. The guard, between the
policy and the privacy wrapper, does two things for such tools:

budget    a rate (calls per minute) and a total per session, over all oracle tools together;
          past either, the call is refused (``budget`` in the audit log).
pattern   many near-identical calls to one tool (arguments that differ by one character from
          an earlier call's) pause the execution for a human, as an ``ask`` rule does; denied,
          the call is refused. Approved, the next run of such calls is let through before
          the guard asks again.

Which tools are oracles: names matching ``[privacy.oracle] tools`` (globs over
``server.tool``; the default names searches, lookups, checks and ``is_``/``has_`` questions),
tools whose input has a ``query``-like parameter, and tools whose output is a boolean.
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr

from codemode.bridge.host import Approver, ToolInvoker, execution_clock_paused
from codemode.config_model import ConfigModel, Hint, PositiveWholeNumber
from codemode.policy.outcome import ApprovalDeniedError, BudgetExhaustedError, note_verdict
from codemode.tools import ToolCall, ToolSpec

__all__ = ["DEFAULT_ORACLE_TOOLS", "OracleGuard", "OracleSettings", "near_identical"]

DEFAULT_ORACLE_TOOLS: tuple[str, ...] = (
    "*search*", "*find*", "*lookup*", "*exists*", "*check*", "*match*", "*contains*",
    "*verify*", "*validate*", "*.is_*", "*.has_*", "*autocomplete*", "*suggest*",
)  # fmt: skip
_QUERY_PARAMETERS = frozenset(
    {"query", "q", "prefix", "contains", "substring", "pattern", "search", "term", "starts_with"}
)
#: Calls remembered per tool to compare new ones with.
_HISTORY = 64
#: A guess grown by at most this many characters still counts as near-identical.
_GROWTH = 3

SpecLookup = Callable[[str, str], ToolSpec | None]


class OracleSettings(ConfigModel):
    """``[privacy.oracle]``: ``enabled``, ``tools``, ``calls_per_minute``,
    ``calls_per_session`` and ``similar_calls`` (near-identical calls before asking)."""

    enabled: StrictBool = True
    tools: Annotated[
        tuple[Annotated[StrictStr, Field(min_length=1)], ...],
        Hint(
            expects="a list of globs over server.tool", fix='write tools = ["*search*", "crm.is_*"]'
        ),
    ] = DEFAULT_ORACLE_TOOLS
    calls_per_minute: PositiveWholeNumber = 60
    calls_per_session: PositiveWholeNumber = 500
    similar_calls: PositiveWholeNumber = 12


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every scalar of JSON-like arguments as text, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value[:64]):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value if isinstance(value, str) else json.dumps(value, default=repr)


def near_identical(first: str, second: str) -> bool:
    """Whether two strings differ by one inserted, deleted or replaced character, or one
    extends the other at either end by at most three (a probe growing a guess)."""
    if first == second:
        return False
    short, long = (first, second) if len(first) <= len(second) else (second, first)
    if len(long) - len(short) <= _GROWTH and short and long.startswith(short):
        return True
    if len(long) - len(short) <= _GROWTH and short and long.endswith(short):
        return True
    if abs(len(first) - len(second)) > 1:
        return False
    if len(first) == len(second):
        return sum(a != b for a, b in zip(first, second, strict=True)) == 1
    short, long = (first, second) if len(first) < len(second) else (second, first)
    index = 0
    while index < len(short) and short[index] == long[index]:
        index += 1
    return short[index:] == long[index + 1 :]


Leaves = dict[str, str]  # JSON path -> string value of one call's arguments


@dataclass
class _ToolHistory:
    recent: deque[Leaves] = dataclass_field(default_factory=lambda: deque(maxlen=_HISTORY))
    similar: int = 0  # near-identical calls since the last approval


class OracleGuard:
    """A ``ToolInvoker`` wrapper that budgets oracle tools and asks before oracle patterns."""

    def __init__(
        self,
        inner: ToolInvoker,
        settings: OracleSettings,
        *,
        specs: SpecLookup,
        approver: Approver | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.settings = settings
        self.specs = specs
        self.approver = approver
        self.clock = clock
        self._lock = threading.Lock()
        self._calls: deque[float] = deque()
        self._total = 0
        self._history: dict[str, _ToolHistory] = {}
        self._is_oracle: dict[str, bool] = {}

    def is_oracle(self, server: str, tool: str) -> bool:
        name = f"{server}.{tool}"
        known = self._is_oracle.get(name)
        if known is None:
            known = self._is_oracle[name] = self._classify(server, tool)
        return known

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if not self.settings.enabled or not self.is_oracle(call.server, call.tool):
            return self.inner.invoke(call, timeout_s=timeout_s)
        name = f"{call.server}.{call.tool}"
        self._spend(name)
        if self._similar(name, call.arguments):
            self._ask(call, name)
        return self.inner.invoke(call, timeout_s=timeout_s)

    def _classify(self, server: str, tool: str) -> bool:
        name = f"{server}.{tool}"
        if any(fnmatch.fnmatchcase(name, glob) for glob in self.settings.tools):
            return True
        spec = self.specs(server, tool)
        if spec is None:
            return False
        properties = spec.input_schema.get("properties")
        if isinstance(properties, dict) and _QUERY_PARAMETERS & {k.lower() for k in properties}:
            return True
        output = spec.output_schema or {}
        return output.get("type") == "boolean"

    def _spend(self, name: str) -> None:
        settings = self.settings
        with self._lock:
            now = self.clock()
            while self._calls and self._calls[0] <= now - 60:
                self._calls.popleft()
            if self._total >= settings.calls_per_session:
                which, limit = "calls_per_session", f"{settings.calls_per_session} per session"
            elif len(self._calls) >= settings.calls_per_minute:
                which, limit = "calls_per_minute", f"{settings.calls_per_minute} per minute"
            else:
                self._total += 1
                self._calls.append(now)
                return
        note_verdict("budget", f"privacy.oracle.{which}")
        raise BudgetExhaustedError(
            f"{name} was not run: this session used its budget for search and yes/no tools "
            f"({limit}). Such tools could rebuild hidden values one guess at a time. Narrow "
            "the query, or ask the user to raise [privacy.oracle] " + which,
            which=f"privacy.oracle.{which}",
        )

    def _similar(self, name: str, arguments: Any) -> bool:
        """Whether some argument is near-identical to the same argument of a recent call
        (compared one by one, so that noise in other arguments does not hide a probe)."""
        leaves = dict(_leaves(arguments, ""))
        with self._lock:
            history = self._history.setdefault(name, _ToolHistory())
            if any(
                near_identical(value, earlier[path])
                for earlier in history.recent
                for path, value in leaves.items()
                if path in earlier
            ):
                history.similar += 1
            history.recent.append(leaves)
            if history.similar >= self.settings.similar_calls:
                history.similar = 0
                return True
        return False

    def _ask(self, call: ToolCall, name: str) -> None:
        reason = (
            f"{self.settings.similar_calls} calls to {name} whose arguments differ from an "
            "earlier call's by one character: a pattern that can rebuild a hidden value one "
            "character at a time"
        )
        approved = False
        if self.approver is not None:
            with execution_clock_paused():
                approved = self.approver.request(call, reason=reason)
        if not approved:
            note_verdict("ask-denied", "privacy.oracle.similar_calls")
            raise ApprovalDeniedError(
                f"{name} was not run: {reason}, and the user did not approve going on. "
                "Do not probe values character by character",
                rule="privacy.oracle.similar_calls",
            )
        note_verdict("ask-approved", "privacy.oracle.similar_calls")

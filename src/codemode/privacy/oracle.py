"""``OracleGuard``: stops calls that rebuild hidden values one guess at a time, judged by what
the host knows.

A tool that answers yes/no or substring questions (a search, an "exists" check) is an oracle:
code that holds only ``<EMAIL_1>`` can still ask "is there a contact whose e-mail starts with
``jo``? with ``jor``?" and rebuild the address. The host holds the value, so it need not guess
from the shape of the traffic: ``codemode.privacy.pieces`` finds the pieces of hidden values
that arguments carry, however they are written (case, wildcards, whitespace, look-alike
letters, reversed). The guard, between the policy and the privacy wrapper, does three things:

probes    a call to an oracle tool whose arguments grow, by letters, a piece of a hidden value
          that an earlier oracle call carried (the piece and more, or the next character a
          pattern places), once what they showed reaches a tenth of the value, pauses the
          execution for a human, as an ``ask`` rule does; denied, the call is refused.
          Calls that look alike but carry no piece of a hidden value (ids 1..1000, dates, one
          character apart) are never paused; one call that carries a piece (a search for a
          word the value holds) is not a probe either.
pieces    the pieces of one hidden value sent to servers its flow rules forbid add up across
          calls and across those servers: once they hold as many of the value's characters as
          the fragment a single argument is refused for (``recall.fragment_chars``), wherever
          they sit in it, the call is refused (``DataFlowDeniedError``). Counting a run instead
          would let pieces through that leave a gap (the one a refusal left) or that alternate
          between two forbidden servers.
budget    a rate (calls per minute) and a total per session over all oracle tools, as a
          backstop; past either, the call is refused (``budget`` in the audit log).

What probes showed and which pieces went where is kept per owner (``ledger.ProbeLedger``,
keyed by the value, not the session's token), so a probe spread over many sessions of one
owner adds up as it would in one.

Which tools are oracles: names matching ``[privacy.oracle] tools`` (globs over
``server.tool``; the default names searches, lookups, checks and ``is_``/``has_`` questions),
tools whose input has a ``query``-like parameter, and tools whose output is a boolean.
"""

from __future__ import annotations

import fnmatch
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictStr

from codemode.bridge.host import ApprovalGate, ToolInvoker, execution_clock_paused
from codemode.config_model import ConfigModel, Hint, PositiveWholeNumber
from codemode.errors import DataFlowDeniedError
from codemode.policy.outcome import ApprovalDeniedError, BudgetExhaustedError, note_verdict
from codemode.privacy.ledger import ProbeLedger
from codemode.privacy.pieces import Knowledge, Piece
from codemode.privacy.recall import fragment_chars
from codemode.privacy.vault import Vault
from codemode.tools import ToolCall, ToolSpec

__all__ = ["DEFAULT_ORACLE_TOOLS", "OracleGuard", "OracleSettings"]

DEFAULT_ORACLE_TOOLS: tuple[str, ...] = (
    "*search*", "*find*", "*lookup*", "*exists*", "*check*", "*match*", "*contains*",
    "*verify*", "*validate*", "*.is_*", "*.has_*", "*autocomplete*", "*suggest*",
)  # fmt: skip
_QUERY_PARAMETERS = frozenset(
    {"query", "q", "prefix", "contains", "substring", "pattern", "search", "term", "starts_with"}
)
#: The share of a hidden value that probes may reveal before a human is asked.
PROBE_SHARE = 0.10

SpecLookup = Callable[[str, str], ToolSpec | None]
# (origin server, destination server, destination tool) -> may its data go there unasked?
MayFlow = Callable[[str, str, str], bool]


class OracleSettings(ConfigModel):
    """``[privacy.oracle]``: ``enabled``, ``tools``, ``calls_per_minute`` and
    ``calls_per_session``. ``similar_calls`` is still read but no longer used: calls that
    look alike are not a signal, pieces of hidden values are."""

    enabled: StrictBool = True
    tools: Annotated[
        tuple[Annotated[StrictStr, Field(min_length=1)], ...],
        Hint(
            expects="a list of globs over server.tool", fix='write tools = ["*search*", "crm.is_*"]'
        ),
    ] = DEFAULT_ORACLE_TOOLS
    # A backstop against mass extraction (guesses over many values), set above what honest
    # batches make (a thousand per-row queries in a minute): the piece guard stops probes of
    # one value without counting honest calls.
    calls_per_minute: PositiveWholeNumber = 1000
    calls_per_session: PositiveWholeNumber = 5000
    similar_calls: PositiveWholeNumber = 12


class OracleGuard:
    """A ``ToolInvoker`` wrapper: probes of hidden values, their pieces sent where they may
    not go, and budgets for oracle tools. Without ``vault`` only the budgets apply."""

    def __init__(
        self,
        inner: ToolInvoker,
        settings: OracleSettings,
        *,
        specs: SpecLookup,
        approver: ApprovalGate | None,
        clock: Callable[[], float] = time.monotonic,
        vault: Vault | None = None,
        may_flow: MayFlow | None = None,
        ledger: ProbeLedger | None = None,
    ) -> None:
        self.inner = inner
        self.settings = settings
        self.specs = specs
        self.approver = approver
        self.clock = clock
        self.may_flow = may_flow
        self.knowledge = Knowledge(vault) if vault is not None else None
        self._lock = threading.Lock()
        self._calls: deque[float] = deque()
        self._total = 0
        self._is_oracle: dict[str, bool] = {}
        # What probes showed and pieces sent where they may not go, per hidden value: the
        # owner's, across sessions (a new session per guess must not start from nothing).
        self.ledger = ledger if ledger is not None else ProbeLedger()

    def is_oracle(self, server: str, tool: str) -> bool:
        name = f"{server}.{tool}"
        known = self._is_oracle.get(name)
        if known is None:
            known = self._is_oracle[name] = self._classify(server, tool)
        return known

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if not self.settings.enabled:
            return self.inner.invoke(call, timeout_s=timeout_s)
        knowledge = self.knowledge
        oracle = self.is_oracle(call.server, call.tool)
        pieces: dict[int, list[Piece]] = {}
        if knowledge is not None and (oracle or not self._flows_unasked_from_all(call)):
            pieces = knowledge.pieces(call.arguments)
        if pieces and self.may_flow is not None:
            self._check_destination(call, pieces)
        if oracle:
            self._spend(f"{call.server}.{call.tool}")
            if pieces:
                self._check_probe(call, pieces)
        result = self.inner.invoke(call, timeout_s=timeout_s)
        if knowledge is not None:
            knowledge.saw(result)
        return result

    def _flows_unasked_from_all(self, call: ToolCall) -> bool:
        """Whether every server the vault's values came from may send its data to ``call``'s
        tool unasked: then pieces of those values in the arguments are not counted (a call
        to a tool that is no oracle is read for pieces only to hold them to the flow rules)."""
        may_flow, knowledge = self.may_flow, self.knowledge
        if may_flow is None or knowledge is None:
            return True
        origins = knowledge.vault.origins()
        return all(may_flow(origin, call.server, call.tool) for origin in origins)

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

    def _check_destination(self, call: ToolCall, pieces: dict[int, list[Piece]]) -> None:
        """Pieces of a value sent to servers its flow rules forbid add up across calls and
        servers, wherever they sit in the value."""
        assert self.knowledge is not None and self.may_flow is not None
        destination, values, ledger = call.server, self.knowledge.values, self.ledger
        with ledger.lock:
            adding: list[tuple[int, set[int]]] = []
            for index, found in pieces.items():
                value = values[index]
                positions = {p for piece in found for p in piece.hidden}
                forbidden = [
                    o for o in sorted(value.origins) if not self.may_flow(o, destination, call.tool)
                ]
                if not forbidden or not positions:
                    continue
                total = ledger.track(value.skeleton).sent | positions
                size = len(value.skeleton)
                if len(total) >= min(size, fragment_chars(size)):
                    servers = sorted(ledger.track(value.skeleton).sent_to | {destination})
                    note_verdict("deny", "privacy.flows")
                    raise DataFlowDeniedError(
                        f"{call.server}.{call.tool} was not run: with earlier calls its "
                        f"arguments send pieces of {value.token} (data from {forbidden[0]!r}) "
                        f"to {', '.join(map(repr, servers))}, where the flow rules do not let "
                        "it go unasked",
                        fix=f"pass {value.token} itself (the flow rules then allow, ask or "
                        "refuse), never in pieces",
                    )
                adding.append((index, total))
            for index, total in adding:
                track = ledger.track(values[index].skeleton)
                track.sent = total
                track.sent_to.add(destination)

    def _check_probe(self, call: ToolCall, pieces: dict[int, list[Piece]]) -> None:
        """Ask a human before an oracle call grows a piece of a value that earlier oracle calls
        carried, by letters, to a tenth of the value or more."""
        assert self.knowledge is not None
        values, ledger = self.knowledge.values, self.ledger
        growing = None
        with ledger.lock:
            for index, found in pieces.items():
                skeleton = values[index].skeleton
                track = ledger.track(skeleton)
                before, earlier = track.probed, track.probes
                enough = max(2, math.ceil(len(skeleton) * PROBE_SHARE))
                for piece in found:
                    # Digits added to a piece are how honest batches differ (id = 6, 7 ...).
                    letters = any(skeleton[p].isalpha() for p in piece.hidden - before)
                    after = len(before | piece.hidden)
                    if letters and after >= enough and any(map(piece.grows, earlier)):
                        growing = (values[index].token, after, len(skeleton))
                        break
                if growing is not None:
                    break
        if growing is not None:
            self._ask(call, *growing)
        with ledger.lock:
            for index, found in pieces.items():
                track = ledger.track(values[index].skeleton)
                track.probed.update(p for f in found for p in f.hidden)
                track.probes.update(f for f in found if f.hidden)

    def _ask(self, call: ToolCall, token: str, shown: int, size: int) -> None:
        name = f"{call.server}.{call.tool}"
        what = (
            f"would show {shown} of the {size} letters and digits of {token}, growing what "
            "earlier searches showed: a probe that rebuilds a hidden value"
        )
        reason = f"{name} {what}"
        approved = False
        if self.approver is not None:
            with execution_clock_paused():
                approved = self.approver.request(call, reason=reason)
        if not approved:
            note_verdict("ask-denied", "privacy.oracle.probe")
            raise ApprovalDeniedError(
                f"{name} was not run: it {what}, and no one approved it. Pass {token} "
                "itself instead of guessing its characters",
                rule="privacy.oracle.probe",
            )
        note_verdict("ask-approved", "privacy.oracle.probe")

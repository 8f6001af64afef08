"""``PrivacyInvoker``: the bridge wrapper that keeps personal data and secrets on the host.

On each call it puts vault values back into the arguments (if the data-flow rules allow the
destination, ``codemode.privacy.flows``), calls the inner invoker, and replaces sensitive
values in the result by tokens (a text of the arguments, as the code wrote them, that the result
hands back unchanged stays as it is: ``codemode.privacy.sent``).
A ``ToolError`` from inside is tokenized too, since upstream messages often echo their input.
``scan_output`` is the second net, for what the code prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from codemode.bridge.host import ToolInvoker
from codemode.errors import DataFlowDeniedError, ToolError
from codemode.policy.engine import SpecLookup
from codemode.policy.flowgate import FlowAsk, approved_tokens
from codemode.privacy.digests import TextDigests
from codemode.privacy.flows import FlowRefusal, allowing_line, decide_flows, flow_action
from codemode.privacy.recall import FRAGMENT_SCAN_MAX, KEPT_MIN_CHARS
from codemode.privacy.sent import SentTexts
from codemode.privacy.settings import PrivacySettings
from codemode.privacy.tokenizer import OUTPUT_SOURCE, detokenize
from codemode.privacy.vault import TokenSource, Vault, VaultEntry
from codemode.tools import ToolCall

__all__ = ["DataFlowDeniedError", "PrivacyInvoker", "scan_output"]

# A call's arguments with vault values put back, the entries passed as tokens, every entry
# they carry, and the digests of their long texts (``PrivacyInvoker._detokenized``).
_Detokenized = tuple[Any, list[VaultEntry], list[VaultEntry], TextDigests]


class PrivacyInvoker:
    """A ``ToolInvoker`` wrapper: detokenize arguments, call ``inner``, tokenize the result.

    ``specs(server, tool)`` tells whether a destination is closed-world (the default flow
    rule, ``codemode.privacy.flows``); ``check_flows`` is the gate the policy runs first."""

    def __init__(
        self,
        inner: ToolInvoker,
        vault: Vault,
        settings: PrivacySettings,
        *,
        specs: SpecLookup | None = None,
    ) -> None:
        self.inner = inner
        self.vault = vault
        self.settings = settings
        self.specs = specs
        self._tokenizer = settings.tokenizer()
        # The flow check's reading of a call's arguments, for ``invoke`` to reuse: the same
        # call (the policy runs ``check_flows`` just before) over an unchanged vault reads the
        # same (a second scan of a MB argument costs milliseconds).
        self._checked: tuple[ToolCall, int, _Detokenized] | None = None
        self._on_idle: list[Callable[[], None]] = []

    def wipe(self) -> None:
        """End of the session: forget every value (the vault, the tokenizer's caches and the
        indexes built from the vault)."""
        self.vault.wipe()
        self.drop_caches()

    def drop_caches(self) -> None:
        """The session went idle: let go of the results kept to skip a second scan and of
        the indexes built from the vault (``on_idle``), which its next call builds again. The
        vault stays, so every token still resolves."""
        self._tokenizer.forget_index()
        for forget in self._on_idle:
            forget()

    def on_idle(self, forget: Callable[[], None]) -> None:
        """Have ``drop_caches`` call ``forget`` too: another wrapper's index of the vault."""
        self._on_idle.append(forget)

    def check_flows(self, call: ToolCall) -> FlowAsk | None:
        """Before the policy asks anything: raise ``DataFlowDeniedError`` for a flow the config
        forbids; return the values the human must allow, or None."""
        if not self.settings.enabled or len(self.vault) == 0:
            return None
        version = self.vault.version
        read = self._detokenized(call)
        self._checked = (call, version, read)
        return self._decide(call, read[2])

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if not self.settings.enabled:
            return self.inner.invoke(call, timeout_s=timeout_s)
        checked, self._checked = self._checked, None
        if checked is not None and checked[0] is call and checked[1] == self.vault.version:
            arguments, passed, carried, digests = checked[2]
        else:
            arguments, passed, carried, digests = self._detokenized(call)
        asked = self._decide(call, carried)
        if asked is not None and not asked.tokens <= approved_tokens():
            raise self._unapproved(call, asked)
        for entry in passed:
            self.vault.mark_delivered(entry.token, call.server)
        real_call = ToolCall(call.server, call.tool, arguments) if passed else call
        try:
            result = self.inner.invoke(real_call, timeout_s=timeout_s)
        except ToolError as error:
            raise self._tokenized_error(call, error) from None
        return self._tokenizer.tokenize(
            result,
            self.vault,
            server=call.server,
            tool=call.tool,
            digests=digests,
            sent=SentTexts(call.arguments),
        )

    def _detokenized(self, call: ToolCall) -> _Detokenized:
        """The arguments with values put back, and every vault entry they carry: the tokens
        passed, then known values (or fragments of them) passed in clear; and the digests of
        their long texts, for a result that brings one back."""
        passed: list[VaultEntry] = []

        def collect(_destination: str, entry: VaultEntry) -> None:
            passed.append(entry)

        arguments = detokenize(call.arguments, self.vault, destination=call.server, check=collect)
        digests = TextDigests()
        if self._flows_unasked_from_all(call.server, call.tool):
            return arguments, passed, list(passed), digests
        return arguments, passed, passed + self._plain_values(arguments, passed, digests), digests

    def _plain_values(
        self, arguments: Any, passed: list[VaultEntry], digests: TextDigests
    ) -> list[VaultEntry]:
        """Values the code passes in clear (rebuilt, or printed and copied): a known value,
        or a fragment of one, counts as if its token had been passed."""
        if len(self.vault) == 0:
            return []
        recall = self._tokenizer.recall(self.vault)
        recall.refresh()
        detectors = self._tokenizer.detectors
        kinds = frozenset(detectors.all_kinds)
        tokens = {entry.token for entry in passed}
        more: list[VaultEntry] = []
        for text in _strings(arguments):
            # Longer text is hashed once: the recall (and the scan of long text) keep what
            # they find by it, for a result that brings the same text back (an echo).
            digest = digests.of(text) if len(text) >= KEPT_MIN_CHARS else None
            found = recall.entries_in(text, detected=kinds, digest=digest)
            # Values the detectors find are looked up directly (cheap in long text too), each
            # value once (a MB can hold one address a thousand times).
            long = len(text) > FRAGMENT_SCAN_MAX
            values = detectors.detect(text, digest) if long else ()
            for value in dict.fromkeys(item.value for item in values):
                entry = self.vault.lookup(self.vault.token_of(value) or "")
                if entry is not None:
                    found.append(entry)
            for entry in found:
                if entry.token not in tokens:
                    more.append(entry)
                    tokens.add(entry.token)
        return more

    def _closed_world(self, server: str, tool: str) -> bool:
        spec = self.specs(server, tool) if self.specs is not None else None
        return spec is not None and spec.open_world is False

    def _flows_unasked_from_all(self, server: str, tool: str) -> bool:
        """Whether the data of every server the vault's values came from may reach
        ``server.tool`` with no one asked. Then no value an argument carries, as its token or
        in clear, can make the flow rules ask or refuse, and the arguments are not read for
        values in clear (a MB of text costs milliseconds)."""
        closed_world = self._closed_world(server, tool)
        settings = self.settings
        return all(
            flow_action(settings, origin, server, closed_world=closed_world) == "allow"
            for origin in self.vault.origins()
        )

    def flows_unasked(self, origin: str, server: str, tool: str) -> bool:
        """Whether ``origin``'s data may reach ``server.tool`` with no one asked (the oracle
        guard holds pieces of a value to this: they must not slip past an approval)."""
        closed_world = self._closed_world(server, tool)
        return flow_action(self.settings, origin, server, closed_world=closed_world) == "allow"

    def _decide(self, call: ToolCall, entries: list[VaultEntry]) -> FlowAsk | None:
        closed_world = self._closed_world(call.server, call.tool)
        decided = decide_flows(
            self.settings, entries, call.server, call.tool, closed_world=closed_world
        )
        if isinstance(decided, FlowRefusal):
            raise self._refused(call, decided)
        return decided

    def _refused(self, call: ToolCall, refusal: FlowRefusal) -> DataFlowDeniedError:
        origin, destination, token = refusal.origin, refusal.destination, refusal.entry.token
        targets, key = self.settings.flow_targets(origin)
        allowed = ", ".join(f'"{t}"' for t in targets) or "nothing else"
        line = allowing_line(self.settings, origin, destination)
        return DataFlowDeniedError(
            f"{call.server}.{call.tool}: argument {token} holds data from server "
            f"{origin!r}, which may not be sent to {destination!r} (rule {key}: {origin} "
            f"data may go back to {origin} and to {allowed}); nothing was asked or sent. If "
            f'the flow is intended, the user must list "{destination}" in [privacy.flows] '
            f"{origin}: {line}",
            fix=f"do not retry unchanged; without that line, do not pass {token} to {destination}",
        )

    def _unapproved(self, call: ToolCall, asked: FlowAsk) -> DataFlowDeniedError:
        origin = sorted(asked.values)[0]
        token = asked.values[origin][0]
        _targets, key = self.settings.flow_targets(origin)
        line = allowing_line(self.settings, origin, call.server)
        return DataFlowDeniedError(
            f"{call.server}.{call.tool}: argument {token} holds data from server {origin!r}, "
            f"which may be sent to {call.server!r} only with the user's approval (rule {key}), "
            f"and none could be asked. To allow such flows always: {line}",
            fix="run it from a client that supports approvals, or ask the user to add that line",
        )

    def scan_output(self, text: str) -> str:
        """Tokenize printed output with this invoker's settings and vault."""
        if not self.settings.enabled or not text:
            return text
        source = TokenSource(OUTPUT_SOURCE, "", "output")
        return self._tokenizer.scan_text(text, self.vault, source=source)

    def scan_value(self, value: Any, *, plain_keys: AbstractSet[str] = frozenset()) -> Any:
        """``scan_output`` over every string in JSON-like data, dict keys included but those
        in ``plain_keys`` (the caller's own words: a result's ``"created"``, ``"count"``)."""
        if not self.settings.enabled:
            return value
        return _scanned(value, self.scan_output, plain_keys)

    def _tokenized_error(self, call: ToolCall, error: ToolError) -> ToolError:
        source = TokenSource(call.server, call.tool, "error")
        tokenizer = self._tokenizer
        message = tokenizer.scan_text(error.message, self.vault, source=source)
        fix = error.fix and tokenizer.scan_text(error.fix, self.vault, source=source)
        try:
            return type(error)(message, fix=fix)
        except TypeError:  # a subclass with another signature
            return ToolError(message, fix=fix)


#: Leaves no text hides in: passed on untouched, with no test of their own (every result
#: finished carries a dozen such counts and flags; each test costs more than the rest).
_PLAIN_LEAVES = frozenset({type(None), bool, int, float})


def _scanned(value: Any, scan: Callable[[str], str], plain_keys: AbstractSet[str]) -> Any:
    """``scan_value`` once the scan is on: a copy of the containers, their strings scanned."""
    if type(value) in _PLAIN_LEAVES:
        return value
    if isinstance(value, str):
        return scan(value)
    if isinstance(value, dict):
        return {
            (scan(key) if isinstance(key, str) and key not in plain_keys else key): _scanned(
                item, scan, plain_keys
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scanned(item, scan, plain_keys) for item in value]
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def scan_output(text: str, vault: Vault, settings: PrivacySettings | None = None) -> str:
    """Tokenize printed stdout/stderr before the model sees it.

    Values the vault already holds map to their tokens (wherever they occur); new detections
    get new tokens, whose data may then be sent anywhere (the code held it in clear already).
    """
    settings = settings if settings is not None else PrivacySettings()
    if not settings.enabled or not text:
        return text
    source = TokenSource(OUTPUT_SOURCE, "", "output")
    return settings.tokenizer().scan_text(text, vault, source=source)

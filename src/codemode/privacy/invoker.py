"""``PrivacyInvoker``: the bridge wrapper that keeps personal data and secrets on the host.

On each call it puts vault values back into the arguments (if the data-flow rules allow the
destination), calls the inner invoker, and replaces sensitive values in the result by tokens.
A ``ToolError`` from inside is tokenized too, since upstream messages often echo their input.
``scan_output`` is the second net, for what the code prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from codemode.bridge.host import ToolInvoker
from codemode.errors import DataFlowDeniedError, ToolError
from codemode.privacy.recall import FRAGMENT_SCAN_MAX
from codemode.privacy.settings import PrivacySettings
from codemode.privacy.tokenizer import OUTPUT_SOURCE, detokenize
from codemode.privacy.vault import TokenSource, Vault, VaultEntry
from codemode.tools import ToolCall

__all__ = ["DataFlowDeniedError", "PrivacyInvoker", "scan_output"]


class PrivacyInvoker:
    """A ``ToolInvoker`` wrapper: detokenize arguments, call ``inner``, tokenize the result."""

    def __init__(self, inner: ToolInvoker, vault: Vault, settings: PrivacySettings) -> None:
        self.inner = inner
        self.vault = vault
        self.settings = settings
        self._tokenizer = settings.tokenizer()

    def wipe(self) -> None:
        """End of the session: forget every value (the vault and the tokenizer's caches)."""
        self.vault.wipe()
        self._tokenizer.clear_caches()

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if not self.settings.enabled:
            return self.inner.invoke(call, timeout_s=timeout_s)
        sent: list[VaultEntry] = []

        def check(destination: str, entry: VaultEntry) -> None:
            self._check_flow(call, destination, entry)
            sent.append(entry)

        arguments = detokenize(call.arguments, self.vault, destination=call.server, check=check)
        self._check_plain_values(call, arguments, sent)
        for entry in sent:
            self.vault.mark_delivered(entry.token, call.server)
        real_call = ToolCall(call.server, call.tool, arguments) if sent else call
        try:
            result = self.inner.invoke(real_call, timeout_s=timeout_s)
        except ToolError as error:
            raise self._tokenized_error(call, error) from None
        return self._tokenizer.tokenize(result, self.vault, server=call.server, tool=call.tool)

    def _check_plain_values(self, call: ToolCall, arguments: Any, sent: list[VaultEntry]) -> None:
        """Flow rules for values the code passes in clear (rebuilt, or printed and copied):
        a known value, or a fragment of one, counts as if its token had been passed."""
        if len(self.vault) == 0:
            return
        recall = self._tokenizer.recall(self.vault)
        recall.refresh()
        detectors = self._tokenizer.detectors
        kinds = frozenset(detectors.all_kinds)
        tokens = {entry.token for entry in sent}
        for text in _strings(arguments):
            found = recall.entries_in(text, detected=kinds)
            # Values the detectors find are looked up directly (cheap in long text too).
            for item in detectors.detect(text) if len(text) > FRAGMENT_SCAN_MAX else ():
                entry = self.vault.lookup(self.vault.token_of(item.value) or "")
                if entry is not None:
                    found.append(entry)
            for entry in found:
                if entry.token not in tokens:
                    self._check_flow(call, call.server, entry)
                    tokens.add(entry.token)

    def scan_output(self, text: str) -> str:
        """Tokenize printed output with this invoker's settings and vault."""
        if not self.settings.enabled or not text:
            return text
        source = TokenSource(OUTPUT_SOURCE, "", "output")
        return self._tokenizer.scan_text(text, self.vault, source=source)

    def scan_value(self, value: Any) -> Any:
        """``scan_output`` over every string in JSON-like data, dict keys included."""
        if not self.settings.enabled:
            return value
        if isinstance(value, str):
            return self.scan_output(value)
        if isinstance(value, dict):
            return {
                (self.scan_output(key) if isinstance(key, str) else key): self.scan_value(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.scan_value(item) for item in value]
        return value

    def _check_flow(self, call: ToolCall, destination: str, entry: VaultEntry) -> None:
        for origin in sorted(entry.origins):
            if origin == OUTPUT_SOURCE or self.settings.may_flow(origin, destination):
                continue
            targets, key = self.settings.flow_targets(origin)
            allowed = ", ".join(f'"{t}"' for t in targets) or "nothing else"
            raise DataFlowDeniedError(
                f"{call.server}.{call.tool}: argument {entry.token} holds data from server "
                f"{origin!r}, which may not be sent to {destination!r} (rule {key}: {origin} "
                f"data may go back to {origin} and to {allowed})",
                fix=f'if this flow is intended, the codemode config must list "{destination}" '
                f"in [privacy.flows] {origin} = [...]; otherwise do not pass {entry.token} to "
                f"{destination}",
            )

    def _tokenized_error(self, call: ToolCall, error: ToolError) -> ToolError:
        source = TokenSource(call.server, call.tool, "error")
        tokenizer = self._tokenizer
        message = tokenizer.scan_text(error.message, self.vault, source=source)
        fix = error.fix and tokenizer.scan_text(error.fix, self.vault, source=source)
        try:
            return type(error)(message, fix=fix)
        except TypeError:  # a subclass with another signature
            return ToolError(message, fix=fix)


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

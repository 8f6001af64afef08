"""``redact``: text for logs, with every value the detectors find, and anything like one,
replaced by a ``<KIND>`` marker.

The audit log's messages use it. First the privacy detectors run (the same set that tokenizes
results, markup-aware), then the log rules below, which are deliberately greedy: a log line
that lost a harmless number is better than one that kept part of a phone number or of an
address (a truncated ``maria.lopez@glo`` is no e-mail address to the detectors, but it is one
here).
"""

from __future__ import annotations

import re

from codemode.privacy.detectors import DetectorSet, default_detectors

__all__ = ["LOG_RULES", "redact"]

LOG_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # key=value and "key": "value" forms of secrets
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|authorization"
            r"|auth|cookie|session[_-]?id|private[_-]?key)(\"?\s*[:=]\s*\"?)(bearer\s+|basic\s+)?"
            r"(?!<[A-Z_]+>)[^\s\"',;]+"
        ),
        r"\1\2<SECRET>",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!<[A-Z_]+>)[A-Za-z0-9._~+/=-]{8,}"), r"\1 <SECRET>"),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "<SECRET>",
    ),
    # Anything touching an @: whole addresses and the halves a truncated message shows.
    (re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]*@[\w-]*(?:\.[\w-]*)*"), "<EMAIL>"),
    (re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"), "<IBAN>"),
    # Long tokens that mix letters and digits: API keys, JWTs, session ids, hashes.
    (
        re.compile(
            r"\b(?=[A-Za-z0-9_.+/=-]*\d)(?=[A-Za-z0-9_.+/=-]*[A-Za-z])[A-Za-z0-9_.+/=-]{20,}"
        ),
        "<SECRET>",
    ),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<IP>"),
    (re.compile(r"\b(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}\b"), "<IP>"),
    # Phone, card, account and id numbers: four or more digits, with common separators.
    (re.compile(r"\+?\(?\d(?:[\d\s().-]*\d){3,}"), "<NUMBER>"),
)


def redact(text: str, detectors: DetectorSet | None = None) -> str:
    """``text`` with detected values and value-like pieces replaced by ``<KIND>`` markers."""
    found = (detectors or default_detectors()).detect(text)
    if found:
        pieces: list[str] = []
        end = 0
        for item in found:  # sorted and non-overlapping
            pieces += [text[end : item.start], f"<{item.kind}>"]
            end = item.end
        pieces.append(text[end:])
        text = "".join(pieces)
    return _log_rules(text)


def _log_rules(text: str) -> str:
    for pattern, replacement in LOG_RULES:
        text = pattern.sub(replacement, text)
    return text

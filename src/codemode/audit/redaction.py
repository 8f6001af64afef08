"""Make a short message safe for the audit log: no e-mail addresses, numbers, keys or secrets.

When ``codemode.privacy.detectors`` exists, its ``default_detectors().detect(text)`` runs first
and each detection becomes ``<KIND>``. The built-in patterns below run always, as a second net.
They are deliberately greedy: a log line that lost a harmless number is better than one that
kept a phone number.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["MAX_MESSAGE_CHARS", "scrub"]

MAX_MESSAGE_CHARS = 240

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # key=value and "key": "value" forms of secrets
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|authorization"
            r"|auth|cookie|session[_-]?id|private[_-]?key)(\"?\s*[:=]\s*\"?)(bearer\s+|basic\s+)?"
            r"[^\s\"',;]+"
        ),
        r"\1\2<SECRET>",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <SECRET>"),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "<SECRET>",
    ),
    (re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"), "<EMAIL>"),
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
    # Phone, card, account and ID numbers: four or more digits, with common separators.
    (re.compile(r"\+?\(?\d(?:[\d\s().-]*\d){3,}"), "<NUMBER>"),
)


@cache
def _privacy_redact() -> Callable[[str], str] | None:
    """``codemode.privacy``'s detectors as a redact function, when that package is there."""
    if importlib.util.find_spec("codemode.privacy") is None:
        return None
    try:
        module: Any = importlib.import_module("codemode.privacy.detectors")
        detectors = module.default_detectors()
    except Exception:  # noqa: BLE001 - without it, the built-in patterns still run
        return None

    def redact(text: str) -> str:
        pieces: list[str] = []
        end = 0
        for found in detectors.detect(text):  # sorted and non-overlapping
            if found.start < end:
                continue
            pieces += [text[end : found.start], f"<{found.kind}>"]
            end = found.end
        pieces.append(text[end:])
        return "".join(pieces)

    return redact


def scrub(text: str, *, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` with PII and secrets replaced by ``<KIND>`` markers, cut to ``limit`` chars."""
    # Cut generously first so a huge message costs little; a marker never straddles the cut
    # because the cut happens again after scrubbing.
    text = text[: limit * 8]
    redact = _privacy_redact()
    if redact is not None:
        # A failing detector must not lose the event; the built-in patterns below still run.
        with contextlib.suppress(Exception):
            text = str(redact(text))
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text

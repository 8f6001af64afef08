"""Make a short message safe for the audit log: no e-mail addresses, numbers, keys or secrets.

One detector set: the privacy package's ``redact`` (its detectors, markup-aware, then its
greedy log rules) replaces each value, and anything like one, by a ``<KIND>`` marker.
"""

from __future__ import annotations

from codemode.privacy.redact import redact

__all__ = ["MAX_MESSAGE_CHARS", "scrub"]

MAX_MESSAGE_CHARS = 240


def scrub(text: str, *, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` with PII and secrets replaced by ``<KIND>`` markers, cut to ``limit`` chars."""
    # Cut generously first so a huge message costs little; a marker never straddles the cut
    # because the cut happens again after scrubbing.
    text = redact(text[: limit * 8])
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text

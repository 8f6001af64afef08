"""What the recall compares a value and a text by, and which of their common runs count.

A value and a text are both reduced to their skeleton (``skeleton``: lower-case ASCII letters
and digits). A run they share counts as the value when it is the whole value, or a cut of it
that only the value would show (``judge``): for an e-mail address, a run across the ``@`` with
three characters on each side, or the whole local part as a word of its own; for a phone
number, a run that reaches its last three digits; for a value of several words, not just some
of its whole words. ``codemode.privacy.recall`` finds the runs; this module says what they
are.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from codemode.privacy.skeletons import Offsets, skeleton_of
from codemode.privacy.vault import VaultEntry

__all__ = [
    "MIN_EXACT",
    "MIN_SKELETON",
    "Known",
    "common_run",
    "fragment_chars",
    "judge",
    "known_of",
    "long_enough",
    "may_cut",
    "skeleton",
]

#: Values of fewer characters than this are not recalled at all.
MIN_EXACT = 4
#: A value whose skeleton is shorter than this is matched exactly, never by its fragments;
#: no fragment is shorter.
MIN_SKELETON = 8


def skeleton(text: str) -> str:
    """Lower-case ASCII letters and digits of ``text``, in order."""
    return skeleton_of(text.lower())


def fragment_chars(skeleton_length: int) -> int:
    """How much of a value's skeleton must show for a fragment to count."""
    return max(MIN_SKELETON, math.ceil(skeleton_length * 0.4))


class Known(NamedTuple):
    """A value as the recall compares it (a tuple: a result of records indexes thousands)."""

    entry: VaultEntry
    exact: str
    skeleton: str
    minimum: int  # fragment length
    first_end: int  # a fragment must start before this offset of the skeleton
    last_start: int = 0  # ... and end after this one
    local: int = 0  # an e-mail address: the length of its local part's skeleton
    words: tuple[tuple[int, int], ...] = ()  # a value of several words: its words of letters


def known_of(entry: VaultEntry) -> Known:
    """``entry``'s value as the recall compares it, with the bounds its fragments keep to."""
    value = entry.value if isinstance(entry.value, str) else str(entry.value)
    exact = value if len(value) >= MIN_EXACT else ""
    skel = skeleton(value)
    if len(skel) < MIN_SKELETON:
        return Known(entry, exact, "", 0, 0)
    first_end, last_start, local = len(skel), 0, 0
    minimum = min(len(skel), fragment_chars(len(skel)))
    words: tuple[tuple[int, int], ...] = ()
    if entry.kind == "EMAIL" and "@" in value:
        # At least three characters of the local part must show: a shared domain with a
        # letter or two before it is not a fragment.
        local = len(skeleton(value.split("@", 1)[0]))
        first_end = max(1, local - min(local, 3) + 1)
        minimum = min(minimum, max(MIN_SKELETON, local))  # the local part alone counts
    elif entry.kind == "PHONE":
        last_start = len(skel) - 3  # a shared area code is not a fragment: the end must show
    else:
        words = _plain_words(value)
    return Known(entry, exact, skel, minimum, first_end, last_start, local, words)


def _plain_words(value: str) -> tuple[tuple[int, int], ...]:
    """The skeleton spans of a value's words of letters, if it has several words."""
    parts = [skeleton(part) for part in value.split()]
    if len(parts) < 2:
        return ()
    spans: list[tuple[int, int]] = []
    at = 0
    for part in parts:
        if part.isalpha():
            spans.append((at, at + len(part)))
        at += len(part)
    return tuple(spans)


def common_run(
    known: Known, offset: int, text: str, at: int, size: int
) -> tuple[int, int, int, int]:
    """The spans in ``text`` and in the value's skeleton of the longest common run through a
    seed ``size`` long (at ``at`` in ``text``, ``offset`` in the value)."""
    value = known.skeleton
    left = 0
    while offset - left > 0 and at - left > 0 and value[offset - left - 1] == text[at - left - 1]:
        left += 1
    right = size
    while offset + right < len(value) and at + right < len(text):
        if value[offset + right] != text[at + right]:
            break
        right += 1
    return at - left, at + right, offset - left, offset + right


def long_enough(known: Known, span: tuple[int, int, int, int]) -> bool:
    """Whether a common run (``common_run``) is long enough for a fragment, and starts and
    ends where one of the value may."""
    _text_start, _text_end, start, end = span
    return end - start >= known.minimum and start < known.first_end and end > known.last_start


def judge(
    known: Known, span: tuple[int, int, int, int], text: str, at: Offsets, spelled: bool
) -> tuple[int, int] | None:
    """The part of a common run (``span``: in the text's skeleton, then in the value's) that
    is the value or a cut of it only the value would show, as a span of the text's skeleton;
    None if there is none. ``at``: the text's offset of each skeleton character; ``spelled``:
    the text's skeleton left out ``at`` and ``dot`` written as words."""
    text_start, text_end, start, end = span
    if start == 0 and end == len(known.skeleton):
        return text_start, text_end
    if spelled:  # only a whole address is looked for in its spelled-out form
        return None
    if known.local:
        return _email_cut(known, span, text, at)
    if _whole_words(known.words, start, end):  # some of its words, whole: shared words
        return None
    return text_start, text_end


def _whole_words(words: tuple[tuple[int, int], ...], start: int, end: int) -> bool:
    """Whether ``[start, end)`` is a run of consecutive words of letters of ``words``."""
    at = start
    for low, high in words:
        if low == at and high <= end:
            at = high
    return at == end and at > start


def may_cut(known: Known, span: tuple[int, int, int, int]) -> bool:
    """Whether a common run with an e-mail address may pass ``_email_cut`` (or is the whole
    address): its bounds in the value decide most runs without reading the text. Values that
    share a prefix (``user1500`` of ``user15000@...`` and ``user15001@...``) meet at every
    read of one of them: thousands of runs in a CRM export, each cut in the text otherwise."""
    _text_start, _text_end, start, end = span
    local, domain = known.local, len(known.skeleton) - known.local
    if start == 0 and end >= local:  # the whole value, or its whole local part
        return True
    return start <= local - min(local, 3) and end >= local + min(domain, 3) and start < local


def _email_cut(
    known: Known, span: tuple[int, int, int, int], text: str, at: Offsets
) -> tuple[int, int] | None:
    text_start, text_end, start, end = span
    local, domain = known.local, len(known.skeleton) - known.local
    if start < local < end:
        # Across the @, written as "@" or in one word (a slug, a cut): the run is cut at the
        # nearest whitespace on each side (a name followed by a word is not an address:
        # "Maria Lopez, Globex", "Rowan Brown" against rowan_b@rowansystems.de).
        boundary = text_start + local - start
        head, tail = at[boundary - 1] + 1, at[boundary]
        if "@" in text[head:tail] or not _spaced(text[head:tail]):
            first, last = boundary - 1, boundary
            while first > text_start and not _spaced(text[at[first - 1] : at[first]]):
                first -= 1
            while last < text_end - 1 and not _spaced(text[at[last] : at[last + 1]]):
                last += 1
            low, high = start + first - text_start, start + last + 1 - text_start
            if (
                low <= local - min(local, 3)
                and high >= local + min(domain, 3)
                and high - low >= known.minimum
            ):
                return first, last + 1
    # The whole local part as a word of its own: a slug of it, not a name in a sentence nor
    # the start of a longer word.
    if start != 0 or end < local or local < MIN_SKELETON:
        return None
    first, last = at[text_start], at[text_start + local - 1]
    alone = not text[first - 1 : first].isalnum() and not text[last + 1 : last + 2].isalnum()
    if alone and not _spaced(text[first:last]):
        return text_start, text_start + local
    return None


def _spaced(text: str) -> bool:
    return any(char.isspace() for char in text)

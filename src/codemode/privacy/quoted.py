"""Read a result text that holds a text of the call's arguments whole (a document the tool
stamped, wrapped or quoted): only the tool's own part, and the edges.

The sent text is the code's own, character for character, as an exact echo is
(``codemode.privacy.sent``): what lies wholly inside it is not read for personal data, and no
token is minted for it. What the tool put around it is read as ever, and so is every value
that crosses an edge: a value the tool's words complete (``ops@`` sent, ``example.com``
appended) is the tool's.

A long quoted text is read only ``edge`` characters deep from each of its edges: a value that
crosses an edge lies within them when it is no longer than that. The tokenizer makes ``edge``
at least ``EDGE`` (more than a PEM key, the longest value a built-in detector finds), the
longest match of its detectors that has a bound and the longest value the vault holds. The
values no length bounds are runs of word characters (an address's domain, a JSON web token, a
run of hex or base64): where such a run crosses an edge and goes on to the end of the part
read, or where a value found reaches that end, the value may have been cut by it, and the
whole text is read after all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from codemode.privacy.detection import Detection, detection

__all__ = ["EDGE", "findings_around", "outside"]

#: How deep a quoted text is read from each edge, at least.
EDGE = 20 * 1024
# A value found closer than this to the end of a part read may have been cut by it.
_CUT = 64
# The characters of the values no length bounds (addresses, tokens, hex and base64).
_RUN = re.compile(r"[\w.%+/=@-]*")

#: The findings of a text read whole (the tokenizer's reading).
Read = Callable[[str], Sequence[Detection]]


def findings_around(
    text: str, quoted: tuple[int, int], read: Read, *, edge: int = EDGE
) -> list[Detection] | None:
    """``read``'s findings in ``text`` but those wholly inside ``quoted`` (``(start, end)``:
    where the code's own text lies), in order; None when they cannot be told without reading
    the whole text after all (a value that may go on past a part read)."""
    start, end = quoted
    size = len(text)
    if end - start <= 2 * (edge + _CUT):
        return outside(read(text), quoted)
    first_high, last_low = start + edge, end - edge
    if _run_across(text, start, start, first_high - _CUT) or _run_across(
        text, end, last_low + _CUT, end
    ):
        return None
    kept: list[Detection] = []
    for low, high in ((0, first_high), (last_low, size)):
        for found in read(text[low:high]):
            first, last = found.start + low, found.end + low
            if start <= first and last <= end:
                continue  # the code's own
            if (high < size and last > high - _CUT) or (low > 0 and first < low + _CUT):
                return None
            kept.append(found if low == 0 else detection((found.kind, first, last, found.value)))
    return kept


def outside(detections: Sequence[Detection], quoted: tuple[int, int]) -> list[Detection]:
    """``detections`` but those wholly inside ``quoted``."""
    start, end = quoted
    return [d for d in detections if not (start <= d.start and d.end <= end)]


def _run_across(text: str, edge: int, low: int, high: int) -> bool:
    """Whether a run of word characters crosses the edge at ``edge`` (one on each side) and
    takes in all of ``text[low:high]``, the part read on its side, up to the edge."""
    if edge <= 0 or edge >= len(text) or not _is_run(text[edge - 1]) or not _is_run(text[edge]):
        return False
    match = _RUN.match(text, low, high)
    return match is not None and match.end() == high


def _is_run(char: str) -> bool:
    match = _RUN.match(char)
    return match is not None and match.end() == 1

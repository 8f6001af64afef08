"""Text that may be a value written in hex or base64, decoded for the recall to look into.

A tool that computes over the data it holds (SQL's ``hex(email)``, an API that returns
``base64`` fields) can hand the code a hidden value in an encoding: the code gets no token,
and the encoded value could leave by any tool. ``encoded_runs`` finds the runs of text that
read as hex (12 digits or more, an even count, one case, a letter among them: numbers are
not hex) or base64 (16 characters or more,
with both cases and a digit or ``+/_-=``, as encoded text has and words do not), decodes each,
and gives the decoded text; the recall then replaces the whole run with the token of a value
it holds. Ordinary text seldom has such runs (hashes and ids decode to bytes that hold no
value). Runs longer than ``MAX_RUN`` (images, files) are not decoded.

Other encodings (character codes, a value reversed or interleaved with another) are not
undone here: the oracle guard's budgets bound how much of a value such calls can show.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

__all__ = ["MAX_RUN", "encoded_runs"]

MAX_RUN = 65_536
_RUN_CHARS = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/_-"
# Bytes of a run become "x", all others a space: runs are then found with bytes.find, which
# is far faster over a MiB of text than any regular expression.
_RUNS = bytes(ord("x") if c in _RUN_CHARS else ord(" ") for c in range(256))
_SHORTEST = 12
_CHUNK = 1 << 15  # characters of ASCII text marked at a time (``_runs``)
_SEED = b"x" * _SHORTEST
_RUN = re.compile(r"[0-9A-Za-z+/_-]{12,}")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_SEPARATOR = re.compile(r"[+/_-]")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")
_MARK = re.compile(r"[0-9+/_=-]")


def encoded_runs(text: str, *, shortest: int) -> Iterator[tuple[int, int, str]]:
    """``(start, end, decoded)`` for each run of ``text`` that decodes, as hex or base64, to
    text of at least ``shortest`` characters."""
    size = len(text)
    for start, end in _runs(text):
        run = text[start:end]
        # Most runs are ids, hashes and words: each test below rejects them in C.
        parts = (run,) if run.isalnum() else _SEPARATOR.split(run)
        at = start
        for part in parts:  # hex between separators (``id_6a6f...``)
            if len(part) >= _SHORTEST and _is_hex(part):
                decoded = _text(bytes.fromhex(part))
                if len(decoded) >= shortest:
                    yield at, at + len(part), decoded
            at += len(part) + 1
        if run.islower() or run.isupper() or not _both_cases(run):
            continue
        padded = end
        while padded < size and padded - end < 2 and text[padded] == "=":
            padded += 1
        run = text[start:padded]
        if len(run) >= 16 and _MARK.search(run) is not None:
            decoded = _text(_from_base64(run))
            if len(decoded) >= shortest:
                yield start, padded, decoded


def _runs(text: str) -> Iterator[tuple[int, int]]:
    """The maximal runs of hex and base64 characters, 12 or more, up to ``MAX_RUN`` long."""
    size = len(text)
    if size < _SHORTEST:  # most strings of a result: a word, a name, a number
        return
    if not text.isascii():
        for match in _RUN.finditer(text):
            if match.end() - match.start() <= MAX_RUN:
                yield match.start(), match.end()
        return
    # A chunk at a time: its three copies (the slice, ASCII bytes, the marks) stay small enough
    # for malloc to reuse their memory, where copies of a whole MiB were each given fresh
    # pages by the system, which cost as much as the work on them.
    at = 0
    while at < size:
        stop = min(size, at + _CHUNK)
        marks = _marks(text, at, stop)
        seed = marks.find(_SEED)
        while seed >= 0:
            # The first seed after a run's end (a space) starts the next run: the leftmost.
            end = marks.find(b" ", seed)
            if end < 0:
                break  # the run goes on past the chunk
            if end - seed <= MAX_RUN:
                yield at + seed, at + end
            seed = marks.find(_SEED, end)
        else:
            if stop == size:
                return
            # A run the chunk's end cuts starts after its last space: the next chunk has it.
            space = marks.rfind(b" ")
            at = at + space + 1 if space >= 0 else stop
            continue
        start, end = at + seed, _run_end(text, stop)
        if end - start <= MAX_RUN:
            yield start, end
        at = end


def _marks(text: str, start: int, stop: int) -> bytes:
    """``text[start:stop]`` (ASCII) with each hex or base64 character an ``x``, the rest spaces."""
    return text[start:stop].encode("ascii").translate(_RUNS)


def _run_end(text: str, at: int) -> int:
    """Where the run of hex and base64 characters going on at ``at`` (ASCII text) ends."""
    size = len(text)
    while at < size:
        stop = min(size, at + _CHUNK)
        space = _marks(text, at, stop).find(b" ")
        if space >= 0:
            return at + space
        at = stop
    return size


def _is_hex(part: str) -> bool:
    return len(part) % 2 == 0 and not part.isdigit() and _HEX.fullmatch(part) is not None


def _both_cases(run: str) -> bool:
    return _UPPER.search(run) is not None and _LOWER.search(run) is not None


def _from_base64(run: str) -> bytes:
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return b""


# Control characters, and the stand-ins ``surrogateescape`` puts for bytes that are not UTF-8
# (UTF-8 cannot encode a surrogate, so valid text never holds one).
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\udc80-\udcff]")


def _text(data: bytes) -> str:
    """The bytes as text, or nothing: values are text, so bytes that are not UTF-8 or hold
    control characters (a hash, an id, a compressed file) hold no value. (Decoding with
    ``surrogateescape`` spares the exception most runs, random bytes, would raise.)"""
    decoded = data.decode("utf-8", "surrogateescape")
    return "" if _NOT_TEXT.search(decoded) else decoded

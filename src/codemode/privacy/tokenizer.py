"""Replace sensitive values in JSON-like data by vault tokens, and put them back.

``Tokenizer.tokenize`` walks a tool result (dicts, lists, strings, numbers) and replaces each
detected value, also inside longer text, by its token. Fields named by the server's glob paths
are replaced whole whatever they hold, and a string under a secret-like key (``password``,
``api_key``, ``access_token`` ...) is replaced when it looks like a secret. Dict keys are
scanned too. Token-shaped text that a tool returns is never mistaken for a token: unknown names
are reserved so they are never issued, and an issued name becomes a value of its own.

``detokenize`` walks call arguments and puts the value back for every token of the vault, after
asking ``check`` whether it may go to the destination.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codemode.heap import collection_paused
from codemode.privacy.detection import detection
from codemode.privacy.detectors import (
    Detection,
    DetectorSet,
    looks_secret,
    non_overlapping,
)
from codemode.privacy.digests import TextDigests
from codemode.privacy.encoded import encoded_runs
from codemode.privacy.fastscan import FAST_MIN_CHARS
from codemode.privacy.fields import FieldMatcher, State
from codemode.privacy.quoted import EDGE, findings_around, outside
from codemode.privacy.recall import Recall, RecallHit
from codemode.privacy.sent import SentTexts
from codemode.privacy.skeletons import skeleton_of
from codemode.privacy.vault import TOKEN_PATTERN, TokenSource, Vault, VaultEntry, VaultValue

__all__ = ["OUTPUT_SOURCE", "Tokenizer", "detokenize"]

#: The pseudo-server of values first seen in printed output rather than in a tool result.
OUTPUT_SOURCE = "<output>"

_SECRET_KEY = re.compile(
    r"(?i)(?:^|[_\-.])(?P<name>password|passwd|pwd|passphrase|secret|api_?key|apikey"
    r"|access_?key|private_?key|client_?secret|secret_?key|token|access_?token|refresh_?token"
    r"|auth_?token|session_?token|bearer|authorization)$"
)
_NOT_KIND = re.compile(r"[^A-Z0-9_]+")

PathItem = str | int
Check = Callable[[str, VaultEntry], None]


_KEY_CACHE_MAX = 4096
_CLEARED_MIN_LEN = 4096
# What one result's short texts were found to hold, by text (``_Walk.found``): records repeat
# their cities, statuses and notes thousands of times.
_REPEATED_MAX_LEN = 1024
_REPEATED_MAX = 8192
_CLEARED_MAX = 32
# And at most this many characters of results in all (each session has its own tokenizer).
_CLEARED_MAX_CHARS = 1 << 22
_PLAIN = frozenset({int, float, bool, type(None)})
# A result text this long or shorter holds no text of the arguments it could quote whole.
_QUOTED_MIN_CHARS = 8
_PAUSE_FROM_CHARS = FAST_MIN_CHARS  # a shorter text makes too few objects to matter
# The shortest decoded text worth a look for personal data (an address of six characters).
_ENCODED_MIN_LEN = 6


def _key_info(key: str, detectors: DetectorSet) -> tuple[bool, bool | None]:
    secret = _SECRET_KEY.search(key)
    password = None if secret is None else secret.group("name").lower().startswith(("pass", "pwd"))
    return bool(detectors.detect(key)) or ("<" in key and ">" in key), password


def _field_kind(key: str) -> str:
    kind = _NOT_KIND.sub("_", key.upper()).strip("_")
    return kind if kind[:1].isalpha() else f"FIELD_{kind}".rstrip("_")


def _render_path(path: Sequence[PathItem]) -> str:
    out = ""
    for item in path:
        out += f"[{item}]" if isinstance(item, int) else (f".{item}" if out else item)
    return out


class Tokenizer:
    """Tokenizes results with one set of detectors and per-server field rules."""

    def __init__(
        self, detectors: DetectorSet, fields: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.detectors = detectors
        self._fields = {server: FieldMatcher(p) for server, p in (fields or {}).items() if p}
        # dict key -> (holds a detection, None or whether it names a password/secret)
        self._key_info: dict[str, tuple[bool, bool | None]] = {}
        self._recall: Recall | None = None
        self._detected = frozenset(detectors.all_kinds)
        # Long strings already tokenized: (content hash, server) -> (vault version, result).
        self._cleared: dict[tuple[bytes, str], tuple[int, str]] = {}

    def recall(self, vault: Vault) -> Recall:
        """The index of ``vault``'s values (kept while the same vault is used)."""
        if self._recall is None or self._recall.vault is not vault:
            self._recall = Recall(vault)
        return self._recall

    def clear_caches(self) -> None:
        """Forget the strings seen so far (they may hold personal data)."""
        self.detectors.clear_cache()
        self._key_info.clear()
        self._cleared.clear()
        if self._recall is not None:
            self._recall.forget_texts()

    def forget_index(self) -> None:
        """``clear_caches``, and let go of the index of the vault's values (``recall``): the
        next result or output builds it again from the vault (a session that read 90,000
        contacts holds about 35 MB of it)."""
        self.clear_caches()
        self._recall = None

    def tokenize(
        self,
        value: Any,
        vault: Vault,
        *,
        server: str,
        tool: str,
        digests: TextDigests | None = None,
        sent: SentTexts | None = None,
    ) -> Any:
        """A copy of ``value`` with sensitive values replaced by tokens (``value`` is untouched).
        ``digests``: the texts the call's arguments held, hashed already (``PrivacyInvoker``);
        ``sent``: the arguments as the code wrote them, whose texts come back as they are."""
        if value is None or isinstance(value, bool | int | float | bytes):
            return value
        matcher = self._fields.get(server)
        walk = _Walk(self.detectors, vault, server, tool, matcher, self._key_info)
        walk.digests = digests if digests is not None else TextDigests()
        walk.recall = self.recall(vault)
        walk.cleared = self._cleared
        walk.sent = sent
        if isinstance(value, str) and len(value) < _PAUSE_FROM_CHARS:
            walk.recall.refresh()
            return walk.node(value, [], walk.start, None)
        # Records and long text: tens of thousands of strings, findings and tokens, no cycle;
        # and the values the last of them gave the vault indexed (as many again).
        with collection_paused():
            walk.recall.refresh()
            return walk.node(value, [], walk.start, None)

    def scan_text(
        self,
        text: str,
        vault: Vault,
        *,
        source: TokenSource,
        known: bool = True,
    ) -> str:
        """Tokenize free text (printed output). Tokens already in it stay as they are.

        With ``known``, values the vault already holds, and fragments of them, are replaced
        wherever they occur, even where no detector would find them (such as a name taken from
        a named field, or half of an address in a truncated message).
        """
        detections = list(self.detectors.detect(text))
        if known:
            recall = self.recall(vault)
            recall.refresh()
            detections = _merge(_recalled(recall, text, self._detected, detections), detections)
        if not detections:
            return text
        return _replace(text, detections, vault, source)


class _Walk:
    def __init__(
        self,
        detectors: DetectorSet,
        vault: Vault,
        server: str,
        tool: str,
        matcher: FieldMatcher | None,
        key_info: dict[str, tuple[bool, bool | None]],
    ) -> None:
        self.detectors = detectors
        self.kinds = frozenset(detectors.all_kinds)  # once per result, not once per string
        self.vault = vault
        self.server = server
        self.tool = tool
        self.matcher = matcher
        self.key_info = key_info
        self.recall: Recall | None = None
        self.cleared: dict[tuple[bytes, str], tuple[int, str]] | None = None
        self.digests = TextDigests()
        self.sent: SentTexts | None = None
        self.start: State = matcher.start if matcher is not None else frozenset()
        # What each short text of this result holds (``_findings``). The recall's index
        # stays as it was for the whole walk (values issued on the way are recalled from the
        # next result on), so a text's findings stay the same; whether the whole text is a
        # value the vault holds can change on the way, and is asked each time.
        self.found: dict[str, Sequence[Detection]] = {}

    def _own(self, text: str) -> bool:
        """A text of the call's arguments as the code wrote them, handed back unchanged; not a
        value the vault holds (a hidden value never comes back in clear as a whole string,
        whoever wrote it)."""
        return self.sent is not None and self.sent.holds(text) and self.vault.token_of(text) is None

    def source(self, path: Sequence[PathItem]) -> TokenSource:
        return TokenSource(self.server, self.tool, _render_path(path))

    def node(self, value: Any, path: list[PathItem], state: State, whole: str | None) -> Any:
        if isinstance(value, str):
            if self._own(value):
                return value  # the code's own text, handed back
            if whole is not None and value:
                return self.vault.token_for(whole, value, self.source(path))
            return self.text(value, path)
        if isinstance(value, dict):
            return self.mapping(value, path, state, whole)
        if isinstance(value, list | tuple):
            if whole is None and set(map(type, value)) <= _PLAIN:  # numbers only: nothing to do
                return list(value)
            out = []
            for index, item in enumerate(value):
                path.append(index)
                out.append(self.node(item, path, state, whole))
                path.pop()
            return out
        if whole is not None and isinstance(value, int | float) and not isinstance(value, bool):
            return self.vault.token_for(whole, value, self.source(path))
        return value

    def mapping(
        self, value: dict[Any, Any], path: list[PathItem], state: State, whole: str | None
    ) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        matcher = self.matcher
        key_info = self.key_info
        for key, item in value.items():
            if not isinstance(key, str):
                path.append(str(key))
                out[key] = self.node(item, path, state, whole)
                path.pop()
                continue
            path.append(key)
            info = key_info.get(key)
            if info is None:
                info = _key_info(key, self.detectors)
                if len(key_info) < _KEY_CACHE_MAX:
                    key_info[key] = info
            has_pii, secret = info
            new_key = self.text(key, path) if has_pii else key
            inner_whole, inner_state = whole, state
            if state and matcher is not None:
                inner_state = matcher.step(state, key)
                if inner_whole is None and matcher.matched(inner_state):
                    inner_whole = _field_kind(key)
            if (
                secret is not None
                and inner_whole is None
                and isinstance(item, str)
                and looks_secret(item, password=secret)
                and not self._own(item)
            ):
                out[new_key] = self.vault.token_for("SECRET", item, self.source(path))
            else:
                out[new_key] = self.node(item, path, inner_state, inner_whole)
            path.pop()
        return out

    def text(self, text: str, path: Sequence[PathItem]) -> str:
        if self.cleared is None or len(text) < _CLEARED_MIN_LEN:
            return self._text(text, path)
        # A long string this server returned before, unchanged, while the vault has not
        # changed since: the same result, without a second scan.
        digest = self.digests.of(text, keep=False)
        key = (digest, self.server)
        seen = self.cleared.get(key)
        if seen is not None and seen[0] == self.vault.version:
            return seen[1]
        result = self._text(text, path, digest)
        cleared = self.cleared
        if len(result) <= _CLEARED_MAX_CHARS:
            held = len(result) + sum(len(kept) for _version, kept in cleared.values())
            while cleared and (len(cleared) >= _CLEARED_MAX or held > _CLEARED_MAX_CHARS):
                held -= len(cleared.pop(next(iter(cleared)))[1])
            cleared[key] = (self.vault.version, result)
        return result

    def _text(self, text: str, path: Sequence[PathItem], digest: bytes | None = None) -> str:
        known = self.vault.seen_again(text, lambda: self.source(path))
        if known is not None:  # a value seen before (e.g. in a named field) stays hidden
            return known
        repeated = digest is None and len(text) <= _REPEATED_MAX_LEN
        detections = self.found.get(text) if repeated else None
        if detections is None:
            detections = self._findings(text, digest)
            # Token-shaped text too: a name the vault had not issued is reserved at first sight
            # (``_token_literals``), so it never is; one it had issued stays so.
            if repeated and len(self.found) < _REPEATED_MAX:
                self.found[text] = detections
        if not detections:
            return text
        source = self.source(path)
        return _replace(text, detections, self.vault, source)

    def _findings(self, text: str, digest: bytes | None) -> Sequence[Detection]:
        """What ``text`` holds (``_read``), but inside a text of the call's arguments that it
        holds whole: the code's own (``codemode.privacy.quoted``)."""
        quoted = self._quoted(text)
        if quoted is not None:
            edge = max(EDGE, self.detectors.longest_bounded, self.vault.longest_text)
            around = findings_around(text, quoted, lambda part: self._read(part, None), edge=edge)
            if around is not None:
                return around
            return outside(self._read(text, digest), quoted)  # a value cut: read it all
        return self._read(text, digest)

    def _quoted(self, text: str) -> tuple[int, int] | None:
        """Where a text of the call's arguments lies whole inside ``text``, if one does and is
        not a value the vault holds (as ``_own``)."""
        if self.sent is None or len(text) <= _QUOTED_MIN_CHARS:
            return None
        quoted = self.sent.inside(text)
        if quoted is None or self.vault.token_of(text[quoted[0] : quoted[1]]) is not None:
            return None
        return quoted

    def _read(self, text: str, digest: bytes | None) -> Sequence[Detection]:
        """What ``text`` holds: the detectors' findings, values in hex or base64, values the
        vault holds and fragments of them, and tokens of this vault written in it."""
        detections: Sequence[Detection] = self.detectors.detect(text, digest)
        encoded = self._encoded(text, digest)
        if encoded:
            detections = _merge(encoded, detections)
        if self.recall is not None:
            covering = _holds_all(text, detections)
            recalled = _recalled(self.recall, text, self.kinds, detections, digest, covering)
            detections = _merge(recalled, detections)
        if "<" in text and ">" in text:
            detections = _merge(self._token_literals(text), detections)
        return detections

    def _encoded(self, text: str, digest: bytes | None = None) -> list[Detection]:
        """Runs of hex or base64 that decode to text holding personal data or a value the
        vault holds (``hex(email)`` from a SQL tool): the whole run is replaced by the token
        of the value inside. Each run is decoded once, here (the recall is asked not to);
        with ``digest``, a text the call's argument held was decoded by its check already."""
        found: list[Detection] = []
        runs = (
            self.recall.encoded(text, shortest=_ENCODED_MIN_LEN, digest=digest)
            if self.recall is not None
            else encoded_runs(text, shortest=_ENCODED_MIN_LEN)
        )
        for start, end, decoded in runs:
            inner = self.detectors.detect(decoded)
            if inner:
                found.append(Detection(inner[0].kind, start, end, inner[0].value))
                continue
            recalled = self.recall.find(decoded, decode=False) if self.recall is not None else []
            if recalled:
                found.append(Detection("", start, end, recalled[0].entry.token))
        return found

    def _token_literals(self, text: str) -> list[Detection]:
        # Token-shaped text from a tool: reserve unknown names; vault issued ones as values.
        found: list[Detection] = []
        for match in TOKEN_PATTERN.finditer(text):
            if self.vault.issued(match.group()):
                found.append(Detection(match.group(1), match.start(), match.end(), match.group()))
            else:
                self.vault.reserve(match.group())
        return found


def _merge(first: list[Detection], second: Sequence[Detection]) -> list[Detection]:
    """Where they overlap the longer span wins (``first`` on a tie); sorted by position."""
    if not first:
        return list(second)
    both = [*first, *second]
    both.sort(key=lambda item: item.start - item.end)  # stable: ``first`` before on a tie
    return non_overlapping(both)


def _replace(text: str, detections: Sequence[Detection], vault: Vault, source: TokenSource) -> str:
    # The tokens of all new spans first, in their order, under one lock of the vault.
    tokens = iter(vault.tokens_for([(d.kind, d.value) for d in detections if d.kind], source))
    parts: list[str] = []
    position = 0
    for item in detections:
        parts.append(text[position : item.start])
        # Kind "": already a token of this vault (from ``_recalled``).
        parts.append(next(tokens) if item.kind else item.value)
        position = item.end
    parts.append(text[position:])
    return "".join(parts)


def _holds_all(text: str, detections: Sequence[Detection]) -> bool:
    """Whether one detection holds every letter and digit of ``text`` (an address, a number
    as a field's whole value): a fragment the recall finds inside it is shorter, and loses
    to it in ``_merge``, unless it takes in all of them too. Not where token literals are
    merged after (one could be longer than the detection)."""
    if len(detections) != 1 or ("<" in text and ">" in text):
        return False
    only = detections[0]
    if only.start == 0 and only.end == len(text):  # a field that is one value: most are
        return True
    return not skeleton_of(text[: only.start].lower()) and not skeleton_of(text[only.end :].lower())


def _recalled(
    recall: Recall,
    text: str,
    detected: frozenset[str],
    detections: Sequence[Detection],
    digest: bytes | None = None,
    covering: bool = False,
) -> list[Detection]:
    """Spans holding a value the vault knows (or a fragment), kind "" and the token: longest
    first (a whole value before a fragment of another as long), so that a whole value wins
    over a fragment of it. A value the detectors find whole is its own value, not a fragment
    of another that it shares letters with (``olivia@olivia-trading.com`` is not a cut of
    ``popescu.olivia@oliviatrading.com``), unless it is written as a piece of it."""
    spans = {(item.start, item.end): item.value for item in detections}
    hits = recall.find(
        text, detected=detected, decode=False, digest=digest, covering=covering, shadows=spans
    )
    if not hits:
        return []
    folded: dict[str, str] = {}  # by token: its value case-folded, once per value
    kept: list[RecallHit] = []
    for hit in hits:
        found = None if hit.whole else spans.get((hit.start, hit.end))
        if found is not None:
            value = folded.get(hit.entry.token)
            if value is None:
                value = folded[hit.entry.token] = str(hit.entry.value).casefold()
            if found.casefold() not in value:
                continue
        kept.append(hit)
    # By length, longest first, then whole values first (two stable sorts, on plain keys).
    kept.sort(key=lambda hit: not hit.whole)
    kept.sort(key=lambda hit: hit.start - hit.end)
    return [detection(("", hit.start, hit.end, hit.entry.token)) for hit in kept]


def detokenize(value: Any, vault: Vault, *, destination: str, check: Check | None = None) -> Any:
    """A copy of ``value`` with every token of ``vault`` replaced by its value.

    A string that is exactly one token gets the original value back (a number stays a number);
    tokens inside text are replaced by the value's text. ``check(destination, entry)`` runs for
    each token first and may raise. Tokens the vault does not know stay as they are.
    """
    if isinstance(value, str):
        return _detokenize_text(value, vault, destination, check)
    if isinstance(value, dict):
        return {
            (
                _text_of(_detokenize_text(k, vault, destination, check))
                if isinstance(k, str)
                else k
            ): (detokenize(v, vault, destination=destination, check=check))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [detokenize(item, vault, destination=destination, check=check) for item in value]
    return value


def _text_of(value: VaultValue) -> str:
    return value if isinstance(value, str) else str(value)


def _detokenize_text(text: str, vault: Vault, destination: str, check: Check | None) -> VaultValue:
    if "<" not in text or len(vault) == 0:
        return text
    whole = TOKEN_PATTERN.fullmatch(text)
    if whole is not None:
        entry = vault.lookup(text)
        if entry is None:
            return text
        if check is not None:
            check(destination, entry)
        return entry.value

    def put_back(match: re.Match[str]) -> str:
        entry = vault.lookup(match.group())
        if entry is None:
            return match.group()
        if check is not None:
            check(destination, entry)
        return _text_of(entry.value)

    return TOKEN_PATTERN.sub(put_back, text)

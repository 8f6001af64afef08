"""Detectors for personal data and secrets in text.

Each detector has a kind (``EMAIL``, ``PHONE`` ...), a regex that finds candidates and, where the
format has one, a checksum or range check that rejects look-alikes. The candidate regexes are
anchored by look-arounds so that a value embedded in a longer identifier (an order id, a UUID, a
version number) is not taken apart.

Built-in kinds and what they accept:

``EMAIL``      RFC-shaped ASCII addresses with a letter TLD.
``PHONE``      ``+`` international numbers (8-15 digits, groups split by space, dot, dash or a
               parenthesised area code); North American ``(415) 555-0142`` / ``415-555-0142``;
               national numbers with a trunk ``0`` (``020 7946 0958``, ``030/1234567``,
               ``01 55 50 12 34``; 9-12 digits, dots not accepted, date-shaped runs rejected).
               Bare digit runs are never phones.
``CARD``       13-19 digits, bare or in groups, with a known issuer prefix whose length fits, and
               a valid Luhn check digit.
``IBAN``       a known country, its exact length, and the ISO 13616 mod-97 check.
``IP``         IPv4 (not after "version"/"build", not a netmask) and IPv6 (parsed by
               ``ipaddress``; at least three groups, so times and MAC addresses fail).
``SSN``        US SSN ``AAA-GG-SSSS`` (dashes or spaces); area 000, 666 and 900-999, group 00,
               serial 0000 and the advertising numbers 078-05-1120 and 219-09-9999 excluded.
``UK_NINO``    UK National Insurance number (prefix letters per HMRC rules; no checksum exists).
``DE_TAX_ID``  German Steuer-ID: 11 digits, one digit repeated 2-3 times in the first ten, and
               the ISO 7064 MOD 11,10 check digit.
``ES_DNI``     Spanish DNI (8 digits + mod-23 letter) and NIE (X/Y/Z + 7 digits + letter).
``SECRET``     known key prefixes (``sk_live_``, ``sk_test_``, ``rk_live_``, ``sk-``/``sk-ant-``,
               ``ghp_`` and the other GitHub token prefixes, ``github_pat_``, ``xox[abprs]-``,
               ``AKIA``/``ASIA``, ``AIza``), JWTs, PEM private keys, and a value after a keyword
               such as ``api_key=``, ``"token": "``, ``password:`` or ``Bearer`` that is long and
               random-looking (any value of 6+ characters after a password keyword).

``NATIONAL_ID`` names the four national id kinds at once. User patterns add kinds of their own.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from codemode.heap import collection_paused
from codemode.privacy.checks import (
    card_valid,
    consistent_spaces,
    de_tax_id_valid,
    es_dni_valid,
    iban_valid,
    intl_phone_valid,
    ipv4_valid,
    ipv6_valid,
    keyword_secret_valid,
    looks_secret,
    luhn_valid,
    nanp_valid,
    ssn_valid,
    trunk_phone_valid,
)
from codemode.privacy.detection import (
    Detection,
    Detector,
    Found,
    Validator,
    detections,
    match_widths,
)
from codemode.privacy.digests import content_digest
from codemode.privacy.fastscan import (
    FAST_MIN_CHARS,
    WindowedKind,
    native_available,
    scan,
    scan_parts,
    windowed_kinds,
)
from codemode.privacy.markup import has_markup, markup_detections
from codemode.privacy.overlaps import keep_found_apart, merge_overlaps, non_overlapping

__all__ = [
    "BUILTIN_KINDS",
    "KIND_GROUPS",
    "Detection",
    "Detector",
    "DetectorSet",
    "default_detectors",
    "expand_kinds",
    "looks_secret",
    "luhn_valid",
    "non_overlapping",
]

# --- the built-in detectors -----------------------------------------------------------------

_TAIL = r"(?![\w]|[.\-/]\d)"  # not followed by more of a number or identifier

_BUILTIN_SPECS: dict[str, list[tuple[str, Validator | None]]] = {
    "SECRET": [
        (r"(?<![\w-])-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----[\s\S]{1,16000}?"
         r"-----END [A-Z ]{0,20}PRIVATE KEY-----", None),
        (r"(?<![\w-])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,247}(?![\w-])", None),
        (r"(?<![\w-])sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,200}(?![\w-])", None),
        (r"(?<![\w-])gh[pousr]_[A-Za-z0-9]{36,251}(?![\w-])", None),
        (r"(?<![\w-])github_pat_[A-Za-z0-9_]{22,244}(?![\w-])", None),
        (r"(?<![\w-])xox[abprs]-[A-Za-z0-9\-]{10,250}(?![\w-])", None),
        (r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])", None),
        (r"(?<![\w-])AIza[0-9A-Za-z_\-]{35}(?![\w-])", None),
        (r"(?<![\w-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?![\w-])",
         None),
        (r"(?i:(?:(?<![A-Za-z0-9])(?P<kw>api[_-]?key|apikey|secret|token|password|passwd|pwd"
         r"|access[_-]?key|private[_-]?key|client[_-]?secret|auth)(?![A-Za-z0-9])"
         r"[\"']?\s{0,3}[:=]\s{0,3}[\"']?|(?<![A-Za-z0-9])bearer\s{1,3})"
         r"(?P<value>[A-Za-z0-9_\-+/=.~!@#$%^&*]{6,512}))",
         keyword_secret_valid),
    ],
    "EMAIL": [
        (r"(?<![\w.+%\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
         r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![\w\-])", None),
    ],
    "IBAN": [
        (r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?"
         r"(?![A-Za-z0-9])", iban_valid),
    ],
    "CARD": [
        (r"(?<![\w.\-])(?:\d{4}[ \-]){3}\d{1,7}" + _TAIL, card_valid),
        (r"(?<![\w.\-])\d{4}[ \-]\d{6}[ \-]\d{4,5}" + _TAIL, card_valid),
        (r"(?<![\w.\-])\d{13,19}" + _TAIL, card_valid),
    ],
    "SSN": [
        (r"(?<![\w.\-])\d{3}[ \-]\d{2}[ \-]\d{4}" + _TAIL, ssn_valid),
    ],
    "UK_NINO": [
        (r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
         r" ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])", consistent_spaces),
    ],
    "DE_TAX_ID": [
        (r"(?<![\w.,\-])[1-9]\d(?: ?\d{3}){3}" + _TAIL, de_tax_id_valid),
    ],
    "ES_DNI": [
        (r"(?<![\w\-])(?:\d{8}|[XYZ]\d{7})-?[A-HJ-NP-TV-Z](?![\w])", es_dni_valid),
    ],
    "IP": [
        (r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
         r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)", ipv4_valid),
        (r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?"
         r"(?![\w:]|\.\d)", ipv6_valid),
    ],
    "PHONE": [
        # ``(?<![\w+])\+`` with the + first: ``re`` then skips ahead to each + instead of trying
        # the look-behind at every position.
        (r"\+(?<![\w+]\+)\d{1,15}(?:[ .\-]?\(\d{1,4}\)\d{0,8})?(?:[ .\-]\d{1,8}){0,7}"
         + _TAIL, intl_phone_valid),
        (r"(?<![\w.\-+(/])(?:1[ .\-])?(?:\(\d{3}\) ?|\d{3}[ .\-])\d{3}[ .\-]\d{4}" + _TAIL,
         nanp_valid),
        (r"(?<![\w.\-+/])(?:0[1-9]\d{0,3}|00[1-9]\d{0,2})(?:[ \-/]\d{2,8}){1,5}" + _TAIL,
         trunk_phone_valid),
        (r"(?<![\w.\-+/])\(0[1-9]\d{0,3}\) ?\d{2,8}(?:[ \-]\d{2,8}){0,4}" + _TAIL,
         trunk_phone_valid),
    ],
}  # fmt: skip

BUILTIN_KINDS: tuple[str, ...] = tuple(_BUILTIN_SPECS)
KIND_GROUPS: Mapping[str, tuple[str, ...]] = {
    "NATIONAL_ID": ("SSN", "UK_NINO", "DE_TAX_ID", "ES_DNI"),
}

# A cheap test each candidate regex needs to pass before it runs: every built-in pattern can only
# match text that passes its gate. Numbers other than IPv4 need six digits close together.
_SIX_DIGITS = re.compile(r"\d(?:\D{0,3}\d){5}")
_DIGIT_DOT = re.compile(r"\d\.\d")
_KEYWORD_HINT = re.compile(r"[:=]|(?i:bearer)")
_PREFIX_HINT = re.compile(
    r"sk[_\-]|rk_|gh[pousr]_|github_pat_|xox[abprs]-|-----|AKIA|ASIA|AIza|eyJ"
)


def _six_digits(text: str) -> bool:
    return _SIX_DIGITS.search(text) is not None


# Where a value of a number kind can start: every one opens with a digit, ``(`` or ``+`` that no
# word character precedes (then neither does its first digit), with two capitals (IBAN,
# UK_NINO) that no letter or digit precedes, or with X, Y or Z (a NIE) that no word character or
# dash precedes (their look-behinds say so). An id such as ``c7770001`` or
# ``user777000@example0.com`` holds six digits but no start.
_NUMBER_START = re.compile(r"(?<!\w)\d|(?<![A-Za-z0-9])[A-Z]{2} ?\d|(?<![\w\-])[XYZ]\d")


def _number_value(text: str) -> bool:
    """Six digits close together, and a place a value of a number kind can start."""
    return _SIX_DIGITS.search(text) is not None and _NUMBER_START.search(text) is not None


def _digit_dot(text: str) -> bool:
    return _DIGIT_DOT.search(text) is not None


def _has_at(text: str) -> bool:
    return "@" in text


def _has_colon(text: str) -> bool:
    return ":" in text


def _keyword_hint(text: str) -> bool:
    return _KEYWORD_HINT.search(text) is not None


def _prefix_hint(text: str) -> bool:
    return _PREFIX_HINT.search(text) is not None


def _gate(detector: Detector) -> Callable[[str], bool]:
    kind, pattern = detector.kind, detector.pattern.pattern
    if kind == "SECRET":
        return _keyword_hint if detector.pattern.groupindex else _prefix_hint
    if kind == "EMAIL":
        return _has_at
    if kind == "IP":
        return _has_colon if pattern.startswith("(?<![\\w:.])") else _digit_dot
    return _number_value


class _Scanner:
    """The patterns of one kind that share a gate, run as one regex where possible.

    Patterns without named groups are joined into one alternation; should a joined match fail
    its check, they are run one by one instead, so nothing they would find is lost.
    """

    def __init__(self, detectors: Sequence[Detector]) -> None:
        joinable = [d for d in detectors if not d.pattern.groupindex]
        if len(joinable) > 1:
            self.joined = tuple(joinable)
            self.separate = tuple(d for d in detectors if d.pattern.groupindex)
            branches = "|".join(f"(?P<_{i}>{d.pattern.pattern})" for i, d in enumerate(joinable))
            self.combined: re.Pattern[str] | None = re.compile(branches)
        else:
            self.joined = ()
            self.separate = tuple(detectors)
            self.combined = None

    def find_into(self, text: str, found: list[Detection]) -> None:
        if self.combined is not None:
            mark = len(found)
            for match in self.combined.finditer(text):
                detector = self.joined[int(match.lastgroup[1:])] if match.lastgroup else None
                if detector is None or (
                    detector.validate is not None and not detector.validate(match)
                ):
                    del found[mark:]
                    for one in self.joined:
                        found.extend(one.find(text))
                    break
                found.append(Detection(detector.kind, match.start(), match.end(), match.group()))
        for detector in self.separate:
            found.extend(detector.find(text))


#: Up to this length, the patterns of several kinds that share a gate run as one alternation
#: (much faster on short values); longer text runs them kind by kind (faster there).
_JOIN_KINDS_MAX_LEN = 96
Gate = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class _GateGroup:
    gate: Gate
    short: tuple[_Scanner, ...]
    long: tuple[_Scanner, ...]


def _gate_groups(detectors: Sequence[Detector]) -> tuple[_GateGroup, ...]:
    by_gate: dict[Gate, list[Detector]] = {}
    for detector in detectors:
        by_gate.setdefault(_gate(detector), []).append(detector)
    groups: list[_GateGroup] = []
    for gate, members in by_gate.items():
        by_kind: dict[str, list[Detector]] = {}
        for detector in members:
            by_kind.setdefault(detector.kind, []).append(detector)
        long = tuple(_Scanner(group) for group in by_kind.values())
        short = (_Scanner(members),) if len(by_kind) > 1 else long
        groups.append(_GateGroup(gate, short, long))
    return tuple(groups)


_BUILTINS: dict[str, tuple[Detector, ...]] = {
    kind: tuple(Detector(kind, re.compile(pattern), check) for pattern, check in specs)
    for kind, specs in _BUILTIN_SPECS.items()
}


# What a set of kinds compiles to holds no state of a session: every session with the same
# kinds shares it (building it was a fifth of a millisecond per new session).
@functools.cache
def _shared_gate_groups(kinds: tuple[str, ...]) -> tuple[_GateGroup, ...]:
    return _gate_groups([d for kind in kinds for d in _BUILTINS[kind]])


@functools.cache
def _shared_windowed_kinds(kinds: tuple[str, ...], native: bool) -> tuple[WindowedKind, ...]:
    return windowed_kinds({k: _BUILTINS[k] for k in kinds}, native=native)


def expand_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """Replace group names (``NATIONAL_ID``) by their kinds; keep order, drop repeats."""
    out: list[str] = []
    for kind in kinds:
        for item in KIND_GROUPS.get(kind, (kind,)):
            if item not in out:
                out.append(item)
    return tuple(out)


_CACHE_MAX_LEN = 2048
_NATIVE_MIN_CHARS = 128
_DIGEST_CACHE_MAX = 64


class DetectorSet:
    """Finds non-overlapping detections in text.

    Where detections overlap, user patterns win, then built-ins in ``BUILTIN_KINDS`` order
    (in short text, kinds sharing a gate run as one alternation: there the leftmost wins).
    Built-in patterns run only on text that passes their cheap gate (six digits close together,
    an ``@``), and results for short strings are cached, so repeated values cost little. The
    cache holds values: give each session its own set and clear it when the session ends.

    A user pattern with a group named ``value`` detects only that group
    (``ref: (?P<value>\\d+)``).
    """

    def __init__(
        self,
        kinds: Sequence[str] = BUILTIN_KINDS,
        patterns: Mapping[str, re.Pattern[str]] | None = None,
    ) -> None:
        selected = expand_kinds(kinds)
        unknown = [kind for kind in selected if kind not in _BUILTINS]
        if unknown:
            raise ValueError(f"unknown detector kinds {unknown}; known: {list(BUILTIN_KINDS)}")
        self.kinds = tuple(kind for kind in BUILTIN_KINDS if kind in selected)
        self.user = tuple(Detector(kind, rx) for kind, rx in (patterns or {}).items())
        self._groups = _shared_gate_groups(self.kinds)
        self._rank = {kind: rank for rank, kind in enumerate(self.all_kinds)}
        self._cached = functools.lru_cache(maxsize=16384)(self._detect)
        self._fast_min = FAST_MIN_CHARS
        self._fast_scan = scan
        self.use_native_anchors(True)
        self._by_digest: dict[bytes, tuple[Detection, ...]] = {}

    @property
    def all_kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self.user) + self.kinds

    @functools.cached_property
    def longest_bounded(self) -> int:
        """The most characters a match of one of these detectors takes, among those whose
        matches have a bound (``codemode.privacy.quoted`` reads that deep at least)."""
        patterns = [d.pattern for d in self.user]
        patterns += [d.pattern for kind in self.kinds for d in _BUILTINS[kind]]
        bounds = (match_widths(pattern)[1] for pattern in patterns)
        return max((bound for bound in bounds if bound is not None), default=0)

    def clear_cache(self) -> None:
        self._cached.cache_clear()
        self._by_digest.clear()

    def use_fast_path(self, enabled: bool) -> None:
        """Whether long text takes the fast path (off: the whole-text scan, for comparison)."""
        self._fast_min = FAST_MIN_CHARS if enabled else sys.maxsize

    def use_native_anchors(self, enabled: bool) -> None:
        """Whether the fast path finds its anchors with Hyperscan, where it is installed (off:
        the pure-Python anchors, which find the same places)."""
        self._windowed = _shared_windowed_kinds(self.kinds, enabled)
        native = enabled and native_available()
        self._window_min = _NATIVE_MIN_CHARS if native else FAST_MIN_CHARS
        self._batched = native and all(kind.all_native for kind in self._windowed)

    def detect(self, text: str, digest: bytes | None = None) -> tuple[Detection, ...]:
        """``digest``: the text's ``content_digest``, when the caller has it already."""
        if len(text) <= _CACHE_MAX_LEN:
            return self._cached(text)
        # Long text seen before (a result passed on, printed, returned again) is not scanned
        # again: its detections are kept by content hash.
        digest = digest or content_digest(text)
        found = self._by_digest.get(digest)
        if found is None:
            found = self._by_digest[digest] = self._detect(text)
            if len(self._by_digest) > _DIGEST_CACHE_MAX:
                del self._by_digest[next(iter(self._by_digest))]
        return found

    def _detect(self, text: str) -> tuple[Detection, ...]:
        if len(text) < self._fast_min:
            return self._detect_now(text)
        with collection_paused():  # thousands of findings in dense text, no cycle
            return self._detect_now(text)

    def _detect_now(self, text: str) -> tuple[Detection, ...]:
        candidates: list[int] | None = None  # where markup may be, when found natively
        detect = self.plain
        detect_all = None
        if len(text) >= self._fast_min:
            found, candidates = self._fast_plain(text)
            detect, detect_all = self._window_plain, self._windows_plain
        else:
            found = self.reference_plain(text)
        if candidates or (candidates is None and has_markup(text)):
            extra = markup_detections(text, detect, candidates, detect_all=detect_all)
            if extra:
                rank = self._rank
                extra.sort(key=lambda item: rank[item[0]])
                # After the plain findings (which never overlap one another): where both
                # overlap, the plain one stays.
                return tuple(keep_found_apart(list(found), extra))
        return found

    def plain(self, text: str) -> tuple[Detection, ...]:
        """Detections in ``text`` as it is written (no markup removed). Long text takes the
        fast path (``codemode.privacy.fastscan``); it hides all the whole-text scan hides."""
        if len(text) >= self._fast_min:
            return self._fast_plain(text)[0]
        return self.reference_plain(text)

    def _fast_plain(self, text: str) -> tuple[tuple[Detection, ...], list[int] | None]:
        found, markup = self._fast_scan(self._windowed, text)
        merged = merge_overlaps(text, self._user_found(text) + found, self._rank)
        return detections(merged), markup

    def _user_found(self, text: str) -> list[Found]:
        return [(d.kind, d.start, d.end, d.value) for u in self.user for d in u.find(text)]

    def _window_plain(self, text: str) -> tuple[Detection, ...]:
        """``plain`` for the windows of long text that markup is removed from: with native
        anchors the fast path pays from ``_NATIVE_MIN_CHARS`` on."""
        if len(text) >= self._window_min:
            return self._fast_plain(text)[0]
        return self.reference_plain(text)

    def _windows_plain(
        self, texts: list[str], changes: list[list[int]] | None = None
    ) -> list[list[Found]]:
        """``_window_plain`` of each of ``texts`` (as ``Found`` tuples: markup drops most);
        with native anchors, those the fast path takes share one pass (``scan_parts``), which
        searches only near ``changes`` (where each text differs from the one it was copied
        from: see ``markup_detections``) when they are given."""
        if not self._batched:
            return [_founds(self._window_plain(text)) for text in texts]
        long = [text for text in texts if len(text) >= self._window_min]
        near = None
        if changes is not None:
            near = [
                at for text, at in zip(texts, changes, strict=True) if len(text) >= self._window_min
            ]
        scanned = iter(scan_parts(self._windowed, long, near))
        out: list[list[Found]] = []
        for text in texts:
            if len(text) < self._window_min:
                out.append(_founds(self.reference_plain(text)))
                continue
            out.append(merge_overlaps(text, self._user_found(text) + next(scanned), self._rank))
        return out

    def reference_plain(self, text: str) -> tuple[Detection, ...]:
        """The whole-text scan: every gated pattern over all of ``text``."""
        found: list[Detection] = []
        for detector in self.user:
            found.extend(detector.find(text))
        short = len(text) <= _JOIN_KINDS_MAX_LEN
        for group in self._groups:
            if group.gate(text):
                for scanner in group.short if short else group.long:
                    scanner.find_into(text, found)
        return self._resolve(found)

    def _resolve(self, found: list[Detection]) -> tuple[Detection, ...]:
        if not found:
            return ()
        if len(found) == 1:
            return (found[0],)
        rank = self._rank
        found.sort(key=lambda item: rank[item.kind])
        return tuple(non_overlapping(found))


def _founds(detections: Iterable[Detection]) -> list[Found]:
    return [(d.kind, d.start, d.end, d.value) for d in detections]


@functools.lru_cache(maxsize=1)
def default_detectors() -> DetectorSet:
    """Every built-in detector (what ``assert_no_pii`` and ``scan_output`` use by default)."""
    return DetectorSet()

"""The checks behind the built-in detectors: checksums, ranges and shapes that reject
look-alikes (Luhn for cards, mod 97 for IBANs, the SSN and tax-id rules, secret entropy)."""

from __future__ import annotations

import ipaddress
import math
import re
from collections import Counter

__all__ = [
    "card_valid",
    "consistent_spaces",
    "de_tax_id_valid",
    "es_dni_valid",
    "iban_valid",
    "intl_phone_valid",
    "ipv4_valid",
    "ipv6_valid",
    "keyword_secret_valid",
    "looks_secret",
    "luhn_valid",
    "nanp_valid",
    "ssn_valid",
    "trunk_phone_valid",
]


_NOT_ASCII_DIGITS = bytes(i for i in range(128) if not 48 <= i <= 57)
_NO_DIGITS = dict.fromkeys(range(48, 58))  # str.translate: drop the ASCII digits


def _digits(text: str) -> str:
    if text.isascii():  # the common case, several times faster as bytes
        return text.encode("ascii").translate(None, _NOT_ASCII_DIGITS).decode("ascii")
    return "".join(ch for ch in text if ch.isdigit())


# Each ASCII digit's value, and the digit sum of its double (what Luhn adds for every second).
_VALUE = bytes.maketrans(b"0123456789", bytes(range(10)))
_DOUBLED = bytes.maketrans(b"0123456789", bytes([0, 2, 4, 6, 8, 1, 3, 5, 7, 9]))


def luhn_valid(digits: str) -> bool:
    if digits.isascii():  # every card number in text, a third of the time of the loop below
        raw = digits.encode("ascii")
        return (sum(raw[-1::-2].translate(_VALUE)) + sum(raw[-2::-2].translate(_DOUBLED))) % 10 == 0
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


# (prefix range low, high, allowed lengths)
_CARD_ISSUERS: tuple[tuple[int, int, frozenset[int]], ...] = (
    (4, 4, frozenset({13, 16, 19})),  # Visa
    (51, 55, frozenset({16})),  # Mastercard
    (2221, 2720, frozenset({16})),  # Mastercard 2-series
    (34, 34, frozenset({15})),  # American Express
    (37, 37, frozenset({15})),
    (300, 305, frozenset({14, 16, 17, 18, 19})),  # Diners Club
    (36, 36, frozenset({14, 16, 17, 18, 19})),
    (38, 39, frozenset({14, 16, 17, 18, 19})),
    (6011, 6011, frozenset({16, 17, 18, 19})),  # Discover
    (644, 649, frozenset({16, 17, 18, 19})),
    (65, 65, frozenset({16, 17, 18, 19})),
    (3528, 3589, frozenset({16, 17, 18, 19})),  # JCB
    (62, 62, frozenset({16, 17, 18, 19})),  # UnionPay
    (50, 50, frozenset(range(12, 20))),  # Maestro
    (56, 58, frozenset(range(12, 20))),
    (63, 63, frozenset(range(12, 20))),
    (67, 67, frozenset(range(12, 20))),
)


def _others(text: str) -> str:
    return "".join(ch for ch in text if not ch.isdigit())


# The same by first digit (each range's numbers share theirs), with the length of each range's
# numbers: (prefix length, low, high, lengths).
_CARD_PREFIXES: dict[int, list[tuple[int, int, int, frozenset[int]]]] = {}
for _low, _high, _lengths in _CARD_ISSUERS:
    _CARD_PREFIXES.setdefault(int(str(_low)[0]), []).append((len(str(_low)), _low, _high, _lengths))


# ASCII first digits no issuer's numbers start with.
_NO_ISSUER = frozenset("01789")


def card_valid(match: re.Match[str]) -> bool:
    raw = match.group()
    if raw[0] in _NO_ISSUER:  # most digit runs, and the quickest to turn down
        return False
    digits = _digits(raw)
    if len(raw) - len(digits) > 1:  # more than one separator: all alike?
        others = raw.translate(_NO_DIGITS) if raw.isascii() else _others(raw)
        if len(set(others)) > 1:
            return False
    size = len(digits)
    if not 13 <= size <= 19 or len(set(digits)) == 1:
        return False
    first = int(digits[0])  # any decimal digit, not only ASCII ones
    issuers = _CARD_PREFIXES.get(first)
    if issuers is None:
        return False
    prefixes = (0, first, int(digits[:2]), int(digits[:3]), int(digits[:4]))
    issuer = any(
        size in lengths and low <= prefixes[length] <= high
        for length, low, high, lengths in issuers
    )
    return issuer and luhn_valid(digits)


_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(match: re.Match[str]) -> bool:
    iban = match.group().replace(" ", "")
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


_VERSION_CONTEXT = re.compile(r"(?i)(?:version|ver|release|build|v)[\s:=]*$")
# The words' last letters in either case (no other character lower-cases to one of them).
_VERSION_WORD_ENDS = frozenset("nredvNREDV")
#: What ``[\s:=]`` matches: every character ``\s`` matches (``str.isspace``), ":" and "=".
CONTEXT_GAP = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000:="
)


def _after_version_word(before: str) -> bool:
    # Cheap first: the context needs one of the words' last letters once the trailing run of
    # ``[\s:=]`` is gone (one ``rstrip``: an IPv4 address is checked thousands of times per MB).
    if before.rstrip(CONTEXT_GAP)[-1:] not in _VERSION_WORD_ENDS:
        return False
    return _VERSION_CONTEXT.search(before) is not None


def _first_group(value: str) -> int:
    return int(value[: value.index(".")])


def ipv4_valid(match: re.Match[str]) -> bool:
    value = match.group()
    # "This network", broadcast, or a netmask such as 255.255.255.0. In ASCII the first group
    # is 0 or 255 only written so (the pattern takes no leading zero).
    if value.startswith(("0.", "255.")) if value.isascii() else _first_group(value) in {0, 255}:
        return False
    start = match.start()
    return not _after_version_word(match.string[max(0, start - 16) : start])


def ipv6_valid(match: re.Match[str]) -> bool:
    value = match.group()
    groups = [part for part in value.split(":") if part]
    if len(groups) < 3:
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


_DATE_SHAPE = re.compile(r"^(\d{1,4})[-/](\d{1,2})[-/](\d{1,4})")


def _looks_like_date(text: str) -> bool:
    found = _DATE_SHAPE.match(text)
    if found is None:
        return False
    a, b, c = (int(part) for part in found.groups())
    return (1 <= b <= 12 and (1 <= a <= 31 or 1 <= c <= 31)) or (1 <= a <= 12 and 1 <= b <= 31)


def intl_phone_valid(match: re.Match[str]) -> bool:
    return 8 <= len(_digits(match.group())) <= 15


def nanp_valid(match: re.Match[str]) -> bool:
    raw = match.group()
    if raw.isascii():  # thousands in digit-dense text: read the groups where the shape puts them
        # ``...\d{3}[ .\-]\d{4}`` ends every match; the area code before it is ``ddd`` and a
        # separator, ``(ddd)`` or ``(ddd) ``.
        exchange = raw[-8:-5]
        area = raw[-13:-10] if raw[-10] == ")" and raw[-9] == " " else raw[-12:-9]
    else:
        digits = _digits(raw)
        if len(digits) == 11:
            digits = digits[1:]
        area, exchange = digits[:3], digits[3:6]
    return (
        area[0] not in "01"
        and exchange[0] not in "01"
        and area[1:] != "11"
        and exchange[1:] != "11"
    )


def trunk_phone_valid(match: re.Match[str]) -> bool:
    raw = match.group()
    digits = _digits(raw)
    low, high = (11, 15) if digits.startswith("00") else (9, 12)
    return low <= len(digits) <= high and not _looks_like_date(raw.lstrip("("))


_SSN_ADVERTISING = frozenset({"078051120", "219099999"})


def ssn_valid(match: re.Match[str]) -> bool:
    raw = match.group()
    if raw[3] != raw[6]:
        return False
    digits = _digits(raw)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return (
        area not in {"000", "666"}
        and area[0] != "9"
        and group != "00"
        and serial != "0000"
        and digits not in _SSN_ADVERTISING
    )


def consistent_spaces(match: re.Match[str]) -> bool:
    raw = match.group()
    spaces = raw.count(" ")
    return spaces in {0, raw.strip().count(" ")} and (spaces == 0 or spaces >= 3)


def de_tax_id_valid(match: re.Match[str]) -> bool:
    digits = _digits(match.group())
    if len(digits) != 11:
        return False
    counts = Counter(digits[:10])
    repeated = [digit for digit, n in counts.items() if n > 1]
    if len(repeated) != 1 or counts[repeated[0]] > 3:
        return False
    if repeated[0] * 3 in digits[:10]:
        return False
    product = 10
    for char in digits[:10]:
        total = (int(char) + product) % 10 or 10
        product = (total * 2) % 11
    check = 11 - product
    return (0 if check == 10 else check) == int(digits[10])


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def es_dni_valid(match: re.Match[str]) -> bool:
    raw = match.group().replace("-", "")
    body, letter = raw[:-1], raw[-1]
    if body[0] in "XYZ":
        body = str("XYZ".index(body[0])) + body[1:]
    return _DNI_LETTERS[int(body) % 23] == letter


def _entropy(text: str) -> float:
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


_PASSWORD_WORDS = re.compile(r"(?i)pass|pwd")
_PLACEHOLDERS = re.compile(r"(?i)^(?:\*+|x+|null|none|redacted|changeme|\$\{.*\}|\{\{.*\}\})$")


def looks_secret(value: str, *, password: bool = False) -> bool:
    """Whether a value behind a secret-like keyword or field name is worth hiding."""
    if _PLACEHOLDERS.match(value) or any(ch.isspace() for ch in value):
        return False
    if password:
        return len(value) >= 6
    classes = sum(
        (
            any(ch.isdigit() for ch in value),
            any(ch.islower() for ch in value),
            any(ch.isupper() for ch in value),
        )
    )
    return len(value) >= 16 and classes >= 2 and _entropy(value) >= 3.0


def keyword_secret_valid(match: re.Match[str]) -> bool:
    keyword = match.group("kw") or ""
    return looks_secret(match.group("value"), password=bool(_PASSWORD_WORDS.search(keyword)))

"""Probes written as LIKE or GLOB patterns inside a query: single-character wildcards that
place one guess at a time, character classes that bisect each place, patterns with no ``%``,
SQL substr() compared with a literal, equal or bisected. Each rebuilds the whole address
without the guard; with it, each pauses before a tenth shows. Honest queries with patterns
(names, dates, ids) never pause."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.policy.outcome import ApprovalDeniedError
from codemode.privacy import PrivacySettings
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.patterns import patterns_in
from codemode.privacy.recall import skeleton
from codemode.tools import ToolCall, ToolSpec

SECRET = "zq.kx7vh3@mailbox-secure.example"
ROWS = [
    (1, "Priya Raman", SECRET),
    (2, "Kofi Okafor", "kofi.okafor2@okafor-trading.example.org"),
    (3, "Kofi Mensah", "kofi3@mensah-partners.example.org"),
]
CHARS = sorted("abcdefghijklmnopqrstuvwxyz0123456789.@-")


class Shop:
    """A SQLite table behind a ``read_query`` tool (an oracle: it has a query parameter)."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE TABLE customers (id INTEGER, name TEXT, email TEXT)")
        self.db.executemany("INSERT INTO customers VALUES (?, ?, ?)", ROWS)

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        cursor = self.db.execute(call.arguments["query"])
        names = [column[0] for column in cursor.description]
        return {"rows": [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]}


SPECS = {
    "read_query": ToolSpec(
        "shop", "read_query", input_schema={"properties": {"query": {}}}, read_only=True
    )
}


def invoker(guarded: bool) -> Callable[[str], bool]:
    oracle = OracleSettings(enabled=guarded, calls_per_session=5000, calls_per_minute=5000)
    config = CodemodeConfig(servers={}, privacy=PrivacySettings(oracle=oracle))
    chain = build_invoker_chain(
        config, Shop(), session="s", specs=lambda s, t: SPECS.get(t), approver=None
    ).invoker
    rows = chain.invoke(
        ToolCall("shop", "read_query", {"query": "SELECT * FROM customers"}), timeout_s=5
    )
    assert rows["rows"][0]["email"].startswith("<EMAIL_")

    def ask(condition: str) -> bool:
        query = f"SELECT id FROM customers WHERE id = 1 AND {condition}"
        return bool(
            chain.invoke(ToolCall("shop", "read_query", {"query": query}), timeout_s=5)["rows"]
        )

    return ask


def like_places(ask: Callable[[str], bool]) -> str:
    known = ""
    for place in range(len(SECRET)):
        char = next((c for c in CHARS if ask(f"email LIKE '{'_' * place}{c}%'")), None)
        if char is None:
            break
        known += char
    return known


def glob_classes(ask: Callable[[str], bool]) -> str:
    known = ""
    for place in range(len(SECRET)):
        low, high = 0, len(CHARS)
        while high - low > 1:
            middle = (low + high) // 2
            members = "".join(CHARS[low:middle]).replace("-", "") + "-" * ("-" in CHARS[low:middle])
            if ask(f"email GLOB '{'?' * place}[{members}]*'"):
                high = middle
            else:
                low = middle
        known += CHARS[low]
    return known


def exact_length(ask: Callable[[str], bool]) -> str:
    known = ""
    for place in range(len(SECRET)):
        rest = "_" * (len(SECRET) - place - 1)
        char = next((c for c in CHARS if ask(f"email LIKE '{'_' * place}{c}{rest}'")), None)
        if char is None:
            break
        known += char
    return known


def substr_equals(ask: Callable[[str], bool]) -> str:
    known = ""
    for place in range(1, len(SECRET) + 1):
        char = next((c for c in CHARS if ask(f"substr(email, {place}, 1) = '{c}'")), None)
        if char is None:
            break
        known += char
    return known


def substr_bisect(ask: Callable[[str], bool]) -> str:
    known = ""
    for place in range(1, len(SECRET) + 1):
        low, high = 0, len(CHARS)
        while high - low > 1:
            middle = (low + high) // 2
            if ask(f"substr(email, {place}, 1) < '{CHARS[middle]}'"):
                high = middle
            else:
                low = middle
        known += CHARS[low]
    return known


PROBES = {
    "like_places": like_places,
    "glob_classes": glob_classes,
    "exact_length": exact_length,
    "substr_equals": substr_equals,
    "substr_bisect": substr_bisect,
}


@pytest.mark.parametrize("name", list(PROBES))
def test_each_pattern_probe_rebuilds_the_address_without_the_guard(name: str) -> None:
    assert PROBES[name](invoker(guarded=False)) == SECRET


@pytest.mark.parametrize("name", list(PROBES))
def test_each_pattern_probe_is_stopped_before_a_tenth_shows(name: str) -> None:
    ask = invoker(guarded=True)
    confirmed: list[str] = []
    original = ask

    def recording(condition: str) -> bool:
        answer = original(condition)
        if answer:
            confirmed.append(condition)
        return answer

    with pytest.raises(ApprovalDeniedError, match=r"Pass <EMAIL_\d> itself"):
        PROBES[name](recording)
    assert len({place(c) for c in confirmed}) < 0.1 * len(skeleton(SECRET)) + 1, confirmed


def place(condition: str) -> int:
    """Which place of the address a confirmed condition was about."""
    at = re.search(r"substr\(email, (\d+)", condition)
    if at is not None:
        return int(at.group(1)) - 1
    return len(re.findall(r"[_?]", condition.split("'")[1].split("[", maxsplit=1)[0]))


def test_honest_patterns_never_pause() -> None:
    ask = invoker(guarded=True)
    for typed in ("K", "Ko", "Kof", "Kofi", "Kofi O", "Kofi Ok", "Kofi Oka"):  # as one types
        ask(f"name LIKE '{typed}%'")  # the address starts with the name the code was given
    for condition in (
        "name LIKE 'Priya%'", "name LIKE '%Raman'", "name GLOB 'P*'", "email LIKE '%@%'",
        "id LIKE '1_'", "name LIKE 'K_fi Okafor'", "email LIKE '%.example'",
        "substr(name, 1, 1) = 'P'", "substr(email, 1, 1) < 'n'", "substr(id, 1, 4) = '2026'",
    ) * 3:  # fmt: skip
        ask(condition)


def test_patterns_are_read_alone_and_quoted_inside_a_query() -> None:
    (alone,) = patterns_in("__k%", longest=10)
    assert alone.fixes("zqkx") == [2] and alone.fixes("zqax") is None
    quoted = list(patterns_in("select 1 where e glob '?[a-c]x*' and n like 'ab'", longest=10))
    assert [p.fixes("zbx") for p in quoted] == [[1, 2]]  # 'ab' has no wildcard
    (exact,) = patterns_in("a__", longest=10)
    assert exact.fixes("abc") == [0] and exact.fixes("abcd") is None

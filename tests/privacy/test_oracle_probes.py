"""The oracle guard judges by what the host knows: probes that grow a piece of a hidden value are
stopped before a tenth of it shows, whatever shape the guesses take; honest batches that carry
no piece of a hidden value never pause; pieces of a value sent where its flow rules forbid add
up across calls and are refused."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from typing import Any

import pytest

from codemode.config import CodemodeConfig
from codemode.engine.chain import build_invoker_chain
from codemode.errors import DataFlowDeniedError
from codemode.policy.outcome import ApprovalDeniedError, BudgetExhaustedError
from codemode.privacy import PrivacySettings
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.pieces import fold
from codemode.privacy.recall import skeleton
from codemode.tokens import count_tokens
from codemode.tools import ToolCall, ToolSpec

SECRET = "jordan.blake@acme.example.com"
ALPHABET = string.ascii_lowercase + string.digits + "._@-"
LOOKALIKES = str.maketrans(
    "aeopcxijs", "\u0430\u0435\u043e\u0440\u0441\u0445\u0456\u0458\u0455"
)  # Latin -> Cyrillic
FIRST = ("Kofi", "Maria", "Chloe", "Liam", "Aisha", "Mateo", "Yuki", "Noah", "Amara", "Lucas")
LAST = ("Okafor", "Lopez", "Chen", "Murphy", "Khan", "Garcia", "Tanaka", "Mensah")


def _customers() -> list[dict[str, str]]:
    rng = random.Random(60)
    rows = [{"id": "1", "name": "Jordan Blake", "email": SECRET, "phone": "+1 415 555 0142"}]
    for number in range(2, 61):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        rows.append(
            {
                "id": str(number),
                "name": f"{first} {last}",
                "email": f"{first}.{last}{number}@{last}-trading.example.org".lower(),
                "phone": f"+44 20 {rng.randint(7000, 7999)} {rng.randint(0, 9999):04d}",
            }
        )
    return rows


CUSTOMERS = _customers()


def _like(pattern: str, value: str) -> bool:
    """A tolerant search engine: LIKE with % and _, folded case and letters, no whitespace."""
    pattern, value = re.sub(r"\s+", "", fold(pattern)), fold(value)
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


class Crm:
    """Customers behind tools; ``search`` and ``read_query`` are oracles; ``mail.send`` writes."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        arguments = call.arguments
        if call.tool == "list_customers":
            return {"customers": CUSTOMERS}
        if call.tool == "search":  # does the lead's address match the pattern?
            return {"found": _like(arguments["query"], SECRET)}
        if call.tool == "search_reversed":  # an index of reversed addresses (domain look-ups)
            return {"found": _like(arguments["query"], SECRET[::-1])}
        if call.tool == "read_query":
            return {"rows": [c for c in CUSTOMERS if f"id = {c['id']}" in arguments["query"]]}
        if call.tool == "send":
            self.sent.append(arguments["body"])
            return {"ok": True}
        raise KeyError(call.tool)


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def request(self, call: ToolCall, *, reason: str) -> bool:
        self.asked.append(reason)
        return self.answer


SPECS = {
    "read_query": ToolSpec(
        "crm", "read_query", input_schema={"properties": {"query": {}}}, read_only=True
    )
}


def chain(crm: Crm, approver: Approver | None, flows: dict[str, list[str]] | None = None) -> Any:
    oracle = OracleSettings(calls_per_session=5000, calls_per_minute=5000)
    privacy = PrivacySettings(oracle=oracle, flows=flows or {})
    config = CodemodeConfig(servers={}, privacy=privacy)
    invoker = build_invoker_chain(
        config, crm, session="s1", specs=lambda s, t: SPECS.get(t), approver=approver
    ).invoker
    rows = invoker.invoke(ToolCall("crm", "list_customers", {}), timeout_s=5)["customers"]
    assert rows[0]["email"].startswith("<EMAIL_") and rows[0]["name"] == "Jordan Blake"
    return invoker


_CASES = random.Random(7)


def _mixed(text: str) -> str:
    """Each call in another random case (``JoRdAn.B%``, ``jORdaN.b%``): no two alike."""
    return "".join(c.upper() if _CASES.random() < 0.5 else c for c in text)


# Each class: (tool, guess for a known part and a next character, whether the guess's answer
# grows the part from the start of the value or from its end).
Guess = Callable[[str, str], str]
CLASSES: dict[str, tuple[str, Guess, bool]] = {
    "prefix": ("search", lambda known, c: f"{known}{c}%", True),
    "case": ("search", lambda known, c: _mixed(known + c) + "%", True),
    "wildcards": ("search", lambda known, c: "_" * len(known) + f"{c}%", True),
    "substring": ("search", lambda known, c: f"%{known}{c}%", True),
    "whitespace": ("search", lambda known, c: " ".join(known + c) + " %", True),
    "confusables": ("search", lambda known, c: (known + c).translate(LOOKALIKES) + "%", True),
    "suffix": ("search", lambda known, c: f"%{c}{known}", False),
    "reversed": ("search_reversed", lambda known, c: f"{(c + known)[::-1]}%", False),
}


def attack(invoker: Any, tool: str, guess: Guess, forward: bool) -> str:
    """Hostile code: grow a guess one character at a time; returns what it confirmed."""
    known = ""
    while True:
        for char in ALPHABET:
            query = guess(known, char)
            if invoker.invoke(ToolCall("crm", tool, {"query": query}), timeout_s=5)["found"]:
                known = known + char if forward else char + known
                break
        else:
            return known


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_oracle_class_works_without_the_guard(name: str) -> None:
    """The baseline: with the guard off, each class rebuilds the address."""
    privacy = PrivacySettings(oracle=OracleSettings(enabled=False))
    invoker = build_invoker_chain(
        CodemodeConfig(servers={}, privacy=privacy), Crm(), session="s", specs=lambda s, t: None,
        approver=None,
    ).invoker  # fmt: skip
    tool, guess, forward = CLASSES[name]
    known = skeleton(attack(invoker, tool, guess, forward))
    assert known in skeleton(SECRET) and len(known) > 0.5 * len(skeleton(SECRET))


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_oracle_class_is_stopped_before_a_tenth_shows(name: str) -> None:
    tool, guess, forward = CLASSES[name]
    confirmed: list[str] = []
    invoker = chain(Crm(), Approver(False))

    def spy(known: str, char: str) -> str:
        confirmed.append(known)
        return guess(known, char)

    with pytest.raises(ApprovalDeniedError, match=r"Pass <EMAIL_\d+> itself") as refused:
        attack(invoker, tool, spy, forward)
    learned = len(skeleton(confirmed[-1]))
    assert learned < 0.1 * len(skeleton(SECRET)), (name, confirmed[-1])
    assert "\n" not in str(refused.value) and count_tokens(str(refused.value)) < 120


def test_honest_batches_never_pause() -> None:
    approver = Approver(False)
    invoker = chain(Crm(), approver)
    for number in range(1, 1001):  # ids 1..1000: 17 and 18 differ by one character
        query = f"SELECT * FROM customers WHERE id = {number}"
        invoker.invoke(ToolCall("crm", "read_query", {"query": query}), timeout_s=5)
    for day in range(365):  # dates
        query = f"2024-{day // 28 % 12 + 1:02d}-{day % 28 + 1:02d}"
        invoker.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
    for number in range(1000):  # 1,000 calls, each one character from the one before
        query = f"invoice-{number:04d}"
        invoker.invoke(ToolCall("crm", "search", {"query": query}), timeout_s=5)
    for row in CUSTOMERS:  # names the code has seen, which share words with the addresses
        invoker.invoke(ToolCall("crm", "search", {"query": f"{row['name']}%"}), timeout_s=5)
    assert approver.asked == []


def test_the_budgets_stay_as_a_backstop() -> None:
    privacy = PrivacySettings(oracle=OracleSettings(calls_per_session=30))
    invoker = build_invoker_chain(
        CodemodeConfig(servers={}, privacy=privacy), Crm(), session="s", specs=lambda s, t: None,
        approver=None,
    ).invoker  # fmt: skip
    for number in range(30):
        invoker.invoke(ToolCall("crm", "search", {"query": f"invoice-{number}"}), timeout_s=5)
    with pytest.raises(BudgetExhaustedError, match="calls_per_session") as refused:
        invoker.invoke(ToolCall("crm", "search", {"query": "invoice-30"}), timeout_s=5)
    assert "\n" not in str(refused.value) and count_tokens(str(refused.value)) < 120


PIECES = ("jordan.", "blake@a", "cme.exa", "mple.com")  # each below the fragment size


def test_pieces_split_below_the_fragment_size_are_refused_at_a_forbidden_destination() -> None:
    crm = Crm()
    invoker = chain(crm, None)  # crm data may go back to crm only
    with pytest.raises(DataFlowDeniedError, match="pieces of <EMAIL_1>") as refused:
        for piece in PIECES:
            invoker.invoke(ToolCall("mail", "send", {"body": piece}), timeout_s=5)
    hidden = skeleton("".join(crm.sent)).replace("jordanblake", "")  # the name is not hidden
    assert len(crm.sent) < len(PIECES) and len(hidden) < 0.4 * len(skeleton(SECRET)), crm.sent
    assert SECRET not in str(refused.value) and count_tokens(str(refused.value)) < 120
    for piece in PIECES:  # back to its own server is fine
        invoker.invoke(ToolCall("crm", "send", {"body": piece}), timeout_s=5)


def test_pieces_may_go_where_the_flow_rules_allow_and_names_anywhere() -> None:
    crm = Crm()
    allowed = chain(crm, None, flows={"crm": ["mail"]})
    for piece in PIECES:
        allowed.invoke(ToolCall("mail", "send", {"body": piece}), timeout_s=5)
    invoker = chain(crm, None)
    for row in CUSTOMERS:  # the names were seen in clear: not pieces of the addresses
        body = f"Dear {row['name']}, your order has shipped. Regards, Acme"
        invoker.invoke(ToolCall("mail", "send", {"body": body}), timeout_s=5)
    assert len(crm.sent) == len(PIECES) + len(CUSTOMERS)

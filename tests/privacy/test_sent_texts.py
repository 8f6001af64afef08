"""A tool result that hands back a text of the call's arguments, as the code wrote it, hands
the code nothing it did not hold: it comes back as it was sent, unread, and no token is minted
for the code's own words. A text that held a token reaches the tool with the value in its
place, so its echo is not the code's own and is tokenized as ever."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.privacy.sent import SentTexts
from codemode.privacy.vault import TokenSource
from codemode.tools import ToolCall

CRM = TokenSource("crm", "list_contacts", "contacts[].phone")
PHONE = "+44 20 7946 0958"
LETTER = ("Dear customer, your order 4417 shipped on 2024-05-02. " * 40) + (
    "Questions to ops@example.com or +49 30 1234567.\n"
)


class Echo:
    """Hands back the arguments it received, and records them."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.received.append(call.arguments)
        return call.arguments["text"]


class Created:
    """Answers like an API that creates a record and returns it with the fields sent."""

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return {"contact": {"id": 7, **call.arguments}, "note": f"created {call.arguments['name']}"}


class Quoted:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return f"You said: {call.arguments['text']}"


def invoker_with(inner: Any, **fields: list[str]) -> tuple[PrivacyInvoker, Vault]:
    vault = Vault()
    settings = PrivacySettings.from_mapping({"fields": fields} if fields else {}, "test.toml")
    return PrivacyInvoker(inner, vault, settings), vault


def invoke(invoker: PrivacyInvoker, tool: str, **arguments: Any) -> Any:
    call = ToolCall("crm", tool, arguments)
    invoker.check_flows(call)
    return invoker.invoke(call, timeout_s=5)


@pytest.mark.parametrize("text", ["mail ops@example.com", LETTER, LETTER * 30])
def test_the_codes_own_text_comes_back_as_it_was_sent(text: str) -> None:
    invoker, vault = invoker_with(Echo())
    assert invoke(invoker, "echo", text=text) == text
    assert len(vault) == 0  # no token for the code's own words, as if crm had sent them


def test_an_echo_of_the_codes_own_text_is_not_scanned(detected_lengths: list[int]) -> None:
    invoker, _vault = invoker_with(Echo())
    assert invoke(invoker, "echo", text=LETTER * 30) == LETTER * 30
    assert detected_lengths == []


def test_a_text_with_a_token_reaches_the_tool_with_the_value_and_comes_back_tokenized() -> None:
    echo = Echo()
    invoker, vault = invoker_with(echo)
    [token] = vault.tokens_for([("PHONE", PHONE)], CRM)
    for text in (f"call {token} today", f"{LETTER}call {token} today"):
        echoed = invoke(invoker, "echo", text=text)
        assert echo.received[-1]["text"] == text.replace(token, PHONE)
        assert PHONE not in echoed and "7946" not in echoed
        assert echoed.endswith(f"call {token} today")  # the value's own token in its place
        # Not the code's text: the values in the rest are the tool's, read as ever.
        assert "ops@example.com" not in echoed


def test_a_hidden_value_inside_the_codes_own_text_comes_back_as_the_code_wrote_it() -> None:
    """Candidate numbers for <PHONE_1>, one of them right, sent as one text and echoed: the
    text is the code's own and comes back as it went (before, the right one came back as
    <PHONE_1>). This closes no confirmation: each candidate sent as a string of its own still
    meets the value (the test below), as printed candidates do (the threat model says so)."""
    invoker, vault = invoker_with(Echo())
    [token] = vault.tokens_for([("PHONE", PHONE)], CRM)
    candidates = "\n".join(f"+44 20 7946 09{n:02d}" for n in range(100))
    assert PHONE in candidates
    echoed = invoke(invoker, "echo", text=candidates)
    assert echoed == candidates and token not in echoed


def test_a_value_the_vault_holds_never_comes_back_in_clear_as_a_whole_string() -> None:
    """Sent whole and handed back, a value the vault holds comes back as its token, as does
    the stored value beside it: a guess meets the value as before, never the value in clear."""

    class Stored:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            return {"phone": PHONE, "note": call.arguments.get("note", "")}

    invoker, vault = invoker_with(Stored())
    token = invoke(invoker, "get_contact")["phone"]
    assert token.startswith("<PHONE_") and len(vault) == 1
    result = invoke(invoker, "get_contact", note=PHONE)
    assert result == {"phone": token, "note": token}
    assert invoke(invoker, "echo_note", note=PHONE)["note"] == token and len(vault) == 1


def test_a_result_that_quotes_the_codes_text_hands_it_back_as_written() -> None:
    """The tool's words around it are its own, and read (``test_quoted_texts``)."""
    invoker, vault = invoker_with(Quoted())
    echoed = invoke(invoker, "echo", text="mail ops@example.com")
    assert echoed == "You said: mail ops@example.com" and len(vault) == 0


def test_fields_the_code_sent_come_back_as_sent_and_the_rest_is_tokenized() -> None:
    # A field rule hides a contact's name whatever it holds; the name the code chose is its own.
    invoker, vault = invoker_with(Created(), crm=["contact.name", "contact.phone"])
    result = invoke(invoker, "create_contact", name="Ada Lovelace", email="ada@example.com")
    assert result["contact"] == {"id": 7, "name": "Ada Lovelace", "email": "ada@example.com"}
    # The note is the server's text, not the code's: the name in it is a value of the result.
    assert result["note"] == "created Ada Lovelace"
    assert len(vault) == 0


def test_a_field_rule_still_hides_what_the_code_did_not_send() -> None:
    class Looked:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            return {"contact": {"name": "Grace Hopper", "phone": PHONE}}

    invoker, vault = invoker_with(Looked(), crm=["contact.name"])
    result = invoke(invoker, "get_contact", name="Ada Lovelace")
    assert result["contact"]["name"].startswith("<NAME_")
    assert result["contact"]["phone"].startswith("<PHONE_")
    assert len(vault) == 2


def test_a_secret_the_code_sent_comes_back_as_sent_and_the_servers_is_hidden() -> None:
    class Login:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            return {"password": call.arguments["password"], "api_key": "sk-" + "Q7x9" * 10}

    invoker, vault = invoker_with(Login())
    result = invoke(invoker, "login", password="correct-Horse-42-battery")
    assert result["password"] == "correct-Horse-42-battery"
    assert result["api_key"].startswith("<SECRET_") and len(vault) == 1


def test_sent_texts_hold_every_text_of_the_arguments_character_for_character() -> None:
    long = "x" * 5000
    sent = SentTexts({"a": ["short", {"b": long}], "c": ("tuple",), "n": 3, "empty": ""})
    assert sent.holds("short") and sent.holds("tuple")
    assert sent.holds("".join(["x"] * 5000))  # an equal text, not the same object
    assert not sent.holds("shorT") and not sent.holds("x" * 4999 + "y") and not sent.holds("")
    assert not sent.holds("a") and not sent.holds("3")  # keys and numbers are not texts sent


def test_many_long_texts_of_one_length_are_held_only_up_to_a_few() -> None:
    """Beyond a few long texts of one length, the rest are not held: they are scanned as any
    other text (the safe side), and a result's text costs at most a few comparisons."""
    from codemode.privacy.sent import _LONG_KEPT

    texts = [f"{n:05d}" + "y" * 5000 for n in range(3 * _LONG_KEPT)]
    sent = SentTexts({"texts": texts})
    held = [sent.holds(text) for text in texts]
    assert sum(held) == _LONG_KEPT


_TEXT = st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, n: a * n, st.sampled_from(["ab", "é", "0"]), st.integers(500, 700)),
)
_ARGUMENTS = st.recursive(
    st.one_of(_TEXT, st.integers(), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _texts_of(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if value else set()
    if isinstance(value, dict):
        return set().union(*map(_texts_of, value.values()))
    if isinstance(value, list):
        return set().union(*map(_texts_of, value))
    return set()


@given(_ARGUMENTS, st.lists(_TEXT, max_size=6))
def test_sent_texts_hold_exactly_the_arguments_texts(arguments: Any, others: list[str]) -> None:
    texts = _texts_of(arguments)
    sent = SentTexts(arguments)
    for text in [*texts, *others]:
        # An equal copy, not the same object: equality is what counts.
        assert sent.holds("".join(list(text))) is (text in texts)

"""A result text that holds a long text of the call's arguments whole (a document the tool
stamped, wrapped or quoted) holds the code's own text there: what lies wholly inside it comes
back as the code wrote it, and only the tool's part and the edges are read. A value that
crosses an edge (the tool's words complete it) is the tool's and is hidden, whichever way it is
found: a detector, a run of base64, a value the vault holds."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.privacy import PrivacyInvoker, PrivacySettings, Vault
from codemode.privacy.detectors import DetectorSet
from codemode.privacy.encoded import MAX_RUN
from codemode.privacy.quoted import EDGE, findings_around, outside
from codemode.privacy.sent import SentTexts
from codemode.privacy.vault import TokenSource
from codemode.tools import ToolCall

CRM = TokenSource("crm", "get_contact", "contact.name")
LINE = "Order 4417 shipped on 2024-05-02; questions to ops@example.com or +49 30 1234567.\n"
LONG = LINE * 14_000  # about 1.1 MB: far longer than the two edges read


class Wraps:
    """Answers with the text it received between words of its own."""

    def __init__(self, before: str = "", after: str = "") -> None:
        self.before, self.after = before, after

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return f"{self.before}{call.arguments['text']}{self.after}"


def invoke(inner: Any, vault: Vault | None = None, **arguments: Any) -> tuple[Any, Vault]:
    vault = vault if vault is not None else Vault()
    invoker = PrivacyInvoker(inner, vault, PrivacySettings())
    call = ToolCall("crm", "save", arguments)
    invoker.check_flows(call)
    return invoker.invoke(call, timeout_s=5), vault


@pytest.mark.parametrize("body", [LINE * 20, LONG], ids=["2 KB", "1 MB"])
def test_the_codes_own_text_inside_a_stamped_result_comes_back_as_written(body: str) -> None:
    wraps = Wraps("saved by boss@corp.example.org\n", "\nsigned +44 20 7946 0958")
    result, vault = invoke(wraps, text=body)
    assert re.fullmatch(r"saved by <EMAIL_\w+>\n.*\nsigned <PHONE_\w+>", result, re.S)
    assert "boss@corp" not in result and "7946" not in result  # the tool's own words: hidden
    inner = result[result.index("\n") + 1 : result.rindex("\n")]
    assert inner == body  # the code's addresses and numbers, as it wrote them
    assert len(vault) == 2  # no token for the code's own words, as if crm had sent them


@pytest.mark.parametrize("body", [LINE * 20, LONG], ids=["2 KB", "1 MB"])
def test_a_value_the_tools_words_complete_across_an_edge_is_hidden(body: str) -> None:
    # The code's text ends with the start of an address and begins with the end of another.
    sent = f"example.org writes: {body}reply to ada.lovelace"
    result, vault = invoke(Wraps("mail grace.hopper@", "@analytical.example.com now"), text=sent)
    assert "grace.hopper" not in result and "ada.lovelace" not in result
    assert re.fullmatch(r"mail <EMAIL_\w+> writes: .*reply to <EMAIL_\w+> now", result, re.S)
    assert {entry.value for entry in vault.entries()} == {
        "grace.hopper@example.org",
        "ada.lovelace@analytical.example.com",
    }


def test_a_run_of_base64_across_an_edge_is_decoded_whole() -> None:
    secret = base64.b64encode(b"contact maria.lopez@globex.example.com today").decode()
    half = len(secret) // 2
    result, vault = invoke(Wraps(f"blob {secret[:half]}"), text=f"{secret[half:]} {LONG}")
    assert secret[:half] not in result and result.startswith("blob <EMAIL_")
    assert [entry.value for entry in vault.entries()] == ["maria.lopez@globex.example.com"]


def test_a_value_the_vault_holds_across_an_edge_stays_hidden() -> None:
    """A name hidden by a field rule, which no detector finds: the tool writes its first
    words, the code's text begins with the last."""
    vault = Vault()
    [token] = vault.tokens_for([("NAME", "Maria Lopez Fernandez")], CRM)
    result, _ = invoke(Wraps("Signed, Maria Lopez"), vault, text=f" Fernandez\n{LONG}")
    assert result.startswith(f"Signed, {token}\n") and "Maria" not in result


def test_a_known_value_longer_than_the_edges_widens_them() -> None:
    note = "".join(f"clause {n} of the settlement between the parties; " for n in range(2000))
    assert len(note) > 2 * max(EDGE, DetectorSet().longest_bounded)
    vault = Vault()
    [token] = vault.tokens_for([("NOTE", note)], CRM)
    cut = 100  # the tool writes the note's first words, the code's text holds the rest
    result, _ = invoke(Wraps(f"Note: {note[:cut]}"), vault, text=f"{note[cut:]}\n{LONG}")
    assert result.startswith(f"Note: {token}") and note[:cut] not in result


def test_a_text_that_held_a_token_is_not_the_codes_own_inside_a_result_either() -> None:
    vault = Vault()
    [token] = vault.tokens_for([("EMAIL", "maria.lopez@globex.example.com")], CRM)
    sent = f"write to {token}\n{LONG}"
    result, _ = invoke(Wraps("saved:\n"), vault, text=sent)
    # The tool received the value, so the result holds the tool's text: read whole.
    assert "maria.lopez" not in result and token in result
    assert "ops@example.com" not in result


def test_a_record_that_quotes_the_codes_text_in_a_field() -> None:
    class Created:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            body = call.arguments["body"]
            return {"id": 7, "by": "boss@corp.example.org", "preview": f"Draft 7:\n{body}"}

    result, vault = invoke(Created(), body=LONG)
    assert result["preview"] == f"Draft 7:\n{LONG}" and result["by"].startswith("<EMAIL_")
    assert len(vault) == 1


def test_only_the_tools_part_and_the_edges_are_read(detected_lengths: list[int]) -> None:
    before = "saved by boss@corp.example.org\n"
    result, _ = invoke(Wraps(before), text=LONG)
    assert result.endswith(LONG)
    assert sum(detected_lengths) <= len(before) + 2 * EDGE < len(LONG) / 5


def test_a_short_quote_of_the_codes_text_is_its_own_too() -> None:
    """A message sent and confirmed: the code's own address comes back as written, the
    tool's words around it are read."""
    result, vault = invoke(
        Wraps("You said: ", " (from ops@corp.example.org)"), text="mail ops@example.com"
    )
    assert result.startswith("You said: mail ops@example.com (from <EMAIL_") and len(vault) == 1


def test_a_short_quote_that_is_a_value_the_vault_holds_comes_back_as_its_token() -> None:
    """A guess of a hidden number, sent and found in the tool's words, is the hidden value:
    its token, as when the guess comes back whole (``test_sent_texts``)."""
    vault = Vault()
    [token] = vault.tokens_for([("PHONE", "+44 20 7946 0958")], CRM)
    result, _ = invoke(Wraps("Ana Silva, "), vault, text="+44 20 7946 0958")
    assert result == f"Ana Silva, {token}"


def test_a_value_that_holds_a_short_quote_is_the_tools() -> None:
    """The code's words inside a longer value of the tool's (a name it searched for, inside
    an address) do not make the value the code's."""
    result, vault = invoke(Wraps("Found: ", "@globex.example.com"), text="maria.lopez")
    assert result.startswith("Found: <EMAIL_") and "maria" not in result and len(vault) == 1


def test_sent_texts_say_where_the_longest_one_lies_inside_a_text() -> None:
    first, second = "a" * 1500 + "!", "b" * 3000 + "?"
    sent = SentTexts({"one": first, "two": [second, "short"], "n": 3})
    assert sent.inside(f"x{second}y{first}") == (1, 3002)  # the longest first
    assert sent.inside(f"--{first}") == (2, 1503)
    assert sent.inside(first) is None  # the same text whole is an echo (``holds``)
    assert sent.inside("x" + first[:-1]) is None
    assert sent.inside("short and more") is None  # under 8 characters: compared whole only
    assert sent.inside("x" + "a" * 20) is None and SentTexts({"q": "ops@example"}).inside(
        "mail ops@example.com"
    ) == (5, 16)


# --- the edges read tell what the whole text tells -------------------------------------------

DETECTORS = DetectorSet()
VALUES = [
    "ops@example.com",
    "+49 30 1234567",
    "4111 1111 1111 1111",
    "192.168.10.24",
    "DE89 3704 0044 0532 0130 00",
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
]
FILLER = st.text(alphabet="abc .,;\n0123456789@+-", min_size=0, max_size=40)
PIECES = st.lists(st.one_of(FILLER, st.sampled_from(VALUES)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(PIECES, PIECES, PIECES, PIECES)
def test_reading_the_edges_finds_what_reading_all_finds_outside_the_quote(
    tool_before: list[str], quote_start: list[str], quote_end: list[str], tool_after: list[str]
) -> None:
    edge = 2048  # pieces of the fast path's length, as in use
    middle = "plain words and numbers 12 34. " * 300
    quote = "".join(quote_start) + middle + "".join(quote_end)
    text = "".join(tool_before) + quote + "".join(tool_after)
    start = len("".join(tool_before))
    quoted = (start, start + len(quote))
    everything = outside(DETECTORS.detect(text), quoted)
    around = findings_around(text, quoted, DETECTORS.detect, edge=edge)
    # Every value here is far shorter than the edge: never a cut one, never a second reading.
    assert around == everything


def test_a_run_longer_than_the_edge_read_has_the_whole_text_read() -> None:
    """A run of base64 begun in the tool's words and going on deeper into the code's text than
    the edge read: what it holds lies past the edge (cut there, it decodes to filler), so the
    whole text is read, and the whole run is hidden."""
    run = base64.b64encode(b"x" * 30_000 + b" maria.lopez@globex.example.com").decode()
    assert EDGE < len(run) < MAX_RUN
    result, vault = invoke(Wraps(f"blob {run[:20]}"), text=f"{run[20:]} {LONG}")
    [entry] = vault.entries()
    assert entry.value == "maria.lopez@globex.example.com"
    assert result == f"blob {entry.token} {LONG}"


def test_a_value_found_at_the_end_of_a_part_read_has_the_whole_text_read() -> None:
    """A value found across an edge that reaches the end of the part read may go on past it
    (here a pattern of the user's that takes in a whole line, narrower than the edge given):
    the whole text is read."""
    detectors = DetectorSet(patterns={"NOTE": re.compile(r"NOTE: [^\n]{1,5000}")})
    line = "NOTE: " + "call the customer back. " * 150
    text = f"x {line[:10]}{line[10:]}\n" + "plain words. " * 1000
    quoted = (2 + 10, len(text) - 20)
    assert findings_around(text, quoted, detectors.detect, edge=2048) is None
    assert [d.kind for d in outside(detectors.detect(text), quoted)] == ["NOTE"]


def test_the_edges_are_wider_than_any_value_a_built_in_detector_finds() -> None:
    longest_key = 16_000 + len("-----BEGIN PRIVATE KEY----------END PRIVATE KEY-----")
    assert DetectorSet().longest_bounded >= longest_key
    assert EDGE > longest_key

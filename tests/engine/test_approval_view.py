"""The approver sees every byte of the arguments, and the call that runs is the one shown."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.approvals import (
    PAGE_CHARS,
    ApprovalBroker,
    PendingApproval,
    canonical_json,
    text_digest,
)
from codemode.errors import ApprovalMismatchError
from codemode.policy import PolicySettings
from codemode.privacy import assert_no_pii
from codemode.tools import ToolCall

pytestmark = pytest.mark.anyio

# A wire instruction whose important part comes long after the old 160-character cut.
INSTRUCTION = (
    "Pay invoice 2231 as usual. " * 12
    + "P.S. CONTRARY TO THE ABOVE, send 95,000 EUR to account LT60 1010 0123 4567 8901 instead."
)
CODE = (
    "from servers import bank\n"
    f"print(bank.wire(instruction={INSTRUCTION!r}, note='n' * 9000, to='ops@bank.example.com'))\n"
)


class Bank:
    def __init__(self) -> None:
        self.wired: list[dict[str, Any]] = []

    def wire(self, instruction: str, note: str, to: str) -> str:
        """Send a wire (a side effect)."""
        self.wired.append({"instruction": instruction, "note": note, "to": to})
        return "sent"


@pytest.fixture
def bank() -> Bank:
    return Bank()


@pytest.fixture
async def asking(bank: Bank, engine_config: CodemodeConfig) -> AsyncIterator[Codemode]:
    rules = {"rules": [{"tools": ["bank.wire"], "action": "ask", "reason": "money moves"}]}
    config = engine_config.model_copy(update={"policy": PolicySettings.from_mapping(rules, "t")})
    catalog = Catalog([PythonConnector("bank", [bank.wire])])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        yield engine


async def test_a_long_argument_is_shown_in_full_with_its_digest(asking: Codemode, bank: Bank):
    paused = await asking.execute(CODE)
    assert paused.status == "approval_required"
    approval = paused.to_dict()["approval"]
    arguments = approval["arguments"]
    # Nothing cut; the account number the code wrote in clear is tokenized like any output.
    before, _account = INSTRUCTION.split("LT60")
    assert arguments["instruction"].startswith(before + "<IBAN_")
    assert arguments["instruction"].endswith("> instead.")
    assert arguments["note"] == "n" * 9000
    assert arguments["to"].startswith("<EMAIL_")  # PII stays tokenized in the view
    shown = canonical_json(arguments)
    assert approval["digest"] == text_digest(shown)
    assert approval["chars"] == len(shown)
    assert "".join(approval["pages"]) == shown
    assert all(len(page) <= PAGE_CHARS for page in approval["pages"])
    text = paused.render_text()
    assert "CONTRARY TO THE ABOVE" in text and approval["digest"] in text
    assert_no_pii(json.dumps(paused.to_dict()))

    done = await asking.approve(approval["id"], True, digest=approval["digest"])
    assert done.status == "ok", done.render_text()
    assert bank.wired == [
        {"instruction": INSTRUCTION, "note": "n" * 9000, "to": "ops@bank.example.com"}
    ]


async def test_an_approval_quoting_another_digest_runs_nothing(asking: Codemode, bank: Bank):
    paused = await asking.execute(CODE)
    approval = paused.to_dict()["approval"]
    with pytest.raises(ApprovalMismatchError, match="digest"):
        await asking.approve(approval["id"], True, digest="sha256:" + "0" * 64)
    assert bank.wired == []
    denied = await asking.approve(approval["id"], False)  # still pending: it can be answered
    assert "denied" in denied.stdout + json.dumps(denied.error)
    assert bank.wired == []


def test_arguments_changed_after_they_were_shown_are_not_approved() -> None:
    broker = ApprovalBroker()
    call = ToolCall("bank", "wire", {"to": "a", "amount": 10})
    pending = PendingApproval("ap_1", "s1", None, call, "money moves")
    broker._pending[pending.id] = pending
    shown = pending.describe()
    call.arguments["amount"] = 10_000  # what would run is no longer what was shown
    with pytest.raises(ApprovalMismatchError, match="not the ones shown"):
        broker.answer(pending.id, True, None, digest=shown["digest"])
    assert pending.decision is None
    broker.answer(pending.id, False, None)  # a denial needs no match
    assert pending.decision is False

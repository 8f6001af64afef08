"""The approver sees every byte of the arguments, and the call that runs is the one shown."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.engine.approvals import (
    INLINE_CHARS,
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
    assert arguments["to"].startswith("<EMAIL_")  # PII stays tokenized in the view
    assert arguments["note"].startswith("n" * 160) and "9,000 characters" in arguments["note"]
    # The whole call is in the file (tokens for PII), and the digest is the file's SHA-256.
    full = Path(approval["file"]).read_text(encoding="utf-8")
    assert approval["digest"] == text_digest(full) and approval["chars"] == len(full) > INLINE_CHARS
    whole = json.loads(full)
    before, _account = INSTRUCTION.split("LT60")
    assert whole["instruction"].startswith(before + "<IBAN_")
    assert whole["instruction"].endswith("> instead.")
    assert whole["note"] == "n" * 9000 and whole["to"] == arguments["to"]
    assert canonical_json(whole) == full
    text = paused.render_text()
    assert approval["digest"] in text and approval["file"] in text
    assert len(text) < 2000  # the model's context gets the preview, not the 9,000 characters
    assert_no_pii(json.dumps(paused.to_dict()) + full)

    done = await asking.approve(approval["id"], True, digest=approval["digest"])
    assert done.status == "ok", done.render_text()
    assert bank.wired == [
        {"instruction": INSTRUCTION, "note": "n" * 9000, "to": "ops@bank.example.com"}
    ]
    assert not Path(approval["file"]).exists()  # removed once the approval is over


async def test_an_approval_quoting_another_digest_runs_nothing(asking: Codemode, bank: Bank):
    paused = await asking.execute(CODE)
    approval = paused.to_dict()["approval"]
    with pytest.raises(ApprovalMismatchError, match="digest"):
        await asking.approve(approval["id"], True, digest="sha256:" + "0" * 64)
    assert bank.wired == []
    denied = await asking.approve(approval["id"], False)  # still pending: it can be answered
    assert "denied" in denied.stdout + json.dumps(denied.error)
    assert bank.wired == []


def test_short_arguments_are_shown_whole_and_long_ones_paged_without_a_file() -> None:
    short = PendingApproval("ap_s", "s1", None, ToolCall("bank", "wire", {"to": "a"}), "r")
    assert short.describe().arguments == {"to": "a"} and short.describe().file is None
    call = ToolCall("bank", "wire", {"note": "x" * 10_000})
    described = PendingApproval("ap_l", "s1", None, call, "r").describe()
    assert described.arguments == {"note": "x" * 10_000}
    assert "".join(described.pages or []) == canonical_json(call.arguments)


def test_arguments_changed_after_they_were_shown_are_not_approved() -> None:
    broker = ApprovalBroker()
    call = ToolCall("bank", "wire", {"to": "a", "amount": 10})
    pending = PendingApproval("ap_1", "s1", None, call, "money moves")
    broker._pending[pending.id] = pending
    shown = pending.describe()
    call.arguments["amount"] = 10_000  # what would run is no longer what was shown
    with pytest.raises(ApprovalMismatchError, match="not the ones shown"):
        broker.answer(pending.id, True, None, digest=shown.digest)
    assert pending.decision is None
    broker.answer(pending.id, False, None)  # a denial needs no match
    assert pending.decision is False


async def test_the_approval_file_and_its_folder_are_the_owners_only(
    asking: Codemode, bank: Bank
) -> None:
    folder = asking.config.gateway.state_dir / "approvals"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # as an older version left it
    paused = await asking.execute(CODE)
    approval = paused.to_dict()["approval"]
    spilled = Path(approval["file"])
    assert spilled.parent == folder
    assert folder.stat().st_mode & 0o777 == 0o700
    assert spilled.stat().st_mode & 0o777 == 0o600
    await asking.approve(approval["id"], False)

"""The terminal approver of `codemode exec` / `codemode run`: the whole call (or the 0600 file
that holds it), hostile characters escaped, the digest checked at approval, remembered scopes;
and `codemode exec --approve ask` answering on a real pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import stat
import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.cli import approval_prompt
from codemode.cli.approval_prompt import ask_on, render_approval
from codemode.cli.main import main
from codemode.config import CodemodeConfig
from codemode.config.model import GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.demo import server_commands
from codemode.engine import Codemode
from codemode.engine.approvals import INLINE_CHARS, canonical_json, text_digest
from codemode.errors import ApprovalMismatchError
from codemode.policy import PolicySettings
from codemode.policy.approval import ApprovalRequest
from codemode.sandbox import SandboxSettings


def view(arguments: Any, **extra: Any) -> ApprovalRequest:
    text = canonical_json(arguments)
    return ApprovalRequest.from_dict(
        {
            "id": "ap_1",
            "tool": "crm.update_lead",
            "arguments": arguments,
            "digest": text_digest(text),
            "chars": len(text),
            "reason": "crm.update_lead is marked destructive",
            **extra,
        }
    )


class Terminal(io.StringIO):
    """A terminal whose user types ``answer``."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    def readline(self, size: int | None = -1) -> str:
        return self.answer


def test_the_whole_call_is_shown_inline_up_to_the_limit_with_its_digest() -> None:
    notes = "n" * (INLINE_CHARS - 40)
    approval = view({"lead_id": "LEAD-1", "notes": notes})
    shown = render_approval(approval)
    assert canonical_json(approval.arguments) in shown  # all of it, not the first 500
    assert approval.digest in shown
    assert "crm.update_lead" in shown and "marked destructive" in shown


def test_the_values_a_call_sends_are_listed_by_origin() -> None:
    approval = view({"to": "<EMAIL_1>"}, values={"to": "mail.send", "from": {"crm": ["<EMAIL_1>"]}})
    assert "sends hidden values from crm: <EMAIL_1>" in render_approval(approval)


HOSTILE = "ok\u202eevil\u202d \u2066x\u2069 zero\u200bwidth \x1b[2J\x9b2J bell\x07 line\nbreak"


def test_control_bidi_and_zero_width_characters_are_shown_escaped() -> None:
    approval = view({"note": HOSTILE}, reason=f"because {HOSTILE}")
    approval = replace(approval, tool="crm.update\u202elead")
    shown = render_approval(approval)
    body = shown.replace("\n", "")  # the approver's own line breaks
    invisible = [c for c in body if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]
    assert invisible == []
    for escape in ("\\u202e", "\\u202d", "\\u2066", "\\u200b", "\\x1b", "\\u009b", "\\x07"):
        assert escape in shown
    assert "\\x0a" in shown  # the reason's newline cannot fake a line of its own


@pytest.mark.parametrize(
    ("typed", "allow", "remember"),
    [
        ("y\n", True, "call"),
        ("t\n", True, "tool"),
        ("server\n", True, "server"),
        ("\n", False, "call"),
        ("maybe\n", False, "call"),
    ],
)
def test_the_answer_says_how_long_it_holds(typed: str, allow: bool, remember: str) -> None:
    terminal = Terminal(typed)
    answer = ask_on(terminal, view({"lead_id": "LEAD-1"}))
    assert (answer.allow, answer.remember) == (allow, remember)
    assert "t = this tool for the session" in terminal.getvalue()
    assert "s = crm's calls of this kind" in terminal.getvalue()


def test_an_approval_whose_shown_text_does_not_match_its_digest_is_refused() -> None:
    approval = view({"lead_id": "LEAD-1"})
    approval = replace(approval, digest=text_digest("something else"))
    terminal = Terminal("y\n")
    assert not ask_on(terminal, approval).allow
    assert "not approved" in terminal.getvalue()


@pytest.fixture
async def engine(tmp_path: Path) -> Any:
    notes: list[str] = []

    def save_notes(lead_id: str, notes_text: str) -> int:
        """Replace a lead's notes."""
        notes.append(notes_text)
        return len(notes_text)

    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=0),
        policy=PolicySettings(rules=({"tools": ["crm.*"], "action": "ask"},)),  # type: ignore[arg-type]
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )
    catalog = Catalog([PythonConnector("crm", [save_notes])])
    async with Codemode(config, catalog=catalog, semantic=False, audit=False) as started:
        started.saved = notes  # type: ignore[attr-defined]
        yield started


LONG = "from servers import crm\nprint(crm.save_notes(lead_id='L1', notes_text='x' * 9000))\n"


@pytest.mark.anyio
async def test_long_arguments_are_in_a_0600_file_whose_digest_is_checked(engine: Any) -> None:
    paused = await engine.execute(LONG)
    approval = paused.approval
    path = Path(approval.file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    terminal = Terminal("y\n")
    shown = render_approval(approval)
    assert str(path) in shown and "9,0" in shown and approval.digest in shown
    # The file is changed after it was shown: the approval is refused at the terminal.
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace("xxx", "yyy", 1), encoding="utf-8")
    assert not ask_on(terminal, approval).allow
    path.write_text(original, encoding="utf-8")
    answer = ask_on(Terminal("y\n"), approval)
    assert answer.allow
    # The engine checks the digest again against the call itself.
    with pytest.raises(ApprovalMismatchError):
        await engine.approve(approval.id, True, digest=text_digest("changed"))
    done = await engine.approve(approval.id, True, digest=approval.digest)
    assert done.status == "ok" and done.stdout == "9000\n"
    assert engine.saved == ["x" * 9000]


def test_exec_asks_on_the_terminal_once_for_a_remembered_tool(tmp_path, capsys, monkeypatch):
    command, *args = server_commands(tmp_path / "data")["crm"]
    config = tmp_path / "codemode.toml"
    config.write_text(
        f"[servers.crm]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    code = tmp_path / "code.py"
    code.write_text(
        "from servers import crm\n"
        "for stage in ['Proposal', 'Negotiation', 'Closed Won']:\n"
        "    crm.update_lead(lead_id='LEAD-0001', fields={'stage': stage})\n"
        "print('updated')\n",
        encoding="utf-8",
    )
    controller, terminal = os.openpty()
    try:
        os.write(controller, b"t\n")  # the user's answer, waiting in the terminal's input
        monkeypatch.setattr(approval_prompt, "TTY", Path(os.ttyname(terminal)))
        status = main(["exec", "--json", "--config", str(config), str(code)])
        shown = os.read(controller, 65536).decode()
    finally:
        os.close(controller)
        os.close(terminal)
    result = json.loads(capsys.readouterr().out)
    assert status == 0, result
    assert result["stdout"] == "updated\n"
    assert shown.count("approval needed for crm.update_lead") == 1
    assert '{"fields":{"stage":"Proposal"},"lead_id":"LEAD-0001"}' in shown
    assert "sha256:" in shown
    assert [(g["scope"], g["target"]) for g in result["grants"]] == [("tool", "crm.update_lead")]

"""The terminal approver of ``codemode exec`` and ``codemode run``.

It shows what the MCP approval view shows: the tool, the reason, the hidden values the call
would send (by token and origin), the digest, and the whole arguments (canonical JSON, as the
digest is taken) up to ``INLINE_CHARS``; longer arguments are in the 0600 file the engine wrote,
whose path is printed. Every control, bidi and zero-width character is shown escaped. At
approval the digest is checked again (the file's, or the shown text's) and passed to the
engine, which refuses the approval if the call changed since.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from codemode.terminal_text import shown_exactly

if TYPE_CHECKING:
    from codemode.policy.approval import ApprovalRequest
    from codemode.policy.grants import ApprovalAnswer, Remember

__all__ = ["TTY", "ask_on", "decide", "render_approval"]

# Answers at the prompt -> how long the approval holds (as approve(remember=...)).
_CHOICES: dict[str, Remember] = {
    "y": "call",
    "yes": "call",
    "t": "tool",
    "tool": "tool",
    "s": "server",
    "server": "server",
}


def render_approval(approval: ApprovalRequest) -> str:
    from codemode.engine.approvals import INLINE_CHARS, canonical_json

    tool = shown_exactly(approval.tool)
    lines = [f"codemode: approval needed for {tool}"]
    lines.append(f"  reason: {shown_exactly(approval.reason)}")
    origins = approval.values.origins if approval.values is not None else {}
    for origin, tokens in origins.items():
        shown = ", ".join(shown_exactly(str(token)) for token in tokens)
        lines.append(f"  sends hidden values from {shown_exactly(str(origin))}: {shown}")
    digest = approval.digest
    file = approval.file
    if file:
        chars = approval.chars or 0
        lines.append(
            f"  arguments: {chars:,} characters, more than {INLINE_CHARS:,}: read them all in "
            f"{shown_exactly(str(file))} (mode 0600; {digest})"
        )
    else:
        text = canonical_json(approval.arguments)
        lines.append(f"  arguments ({len(text):,} characters, {digest}):")
        lines.append(f"    {shown_exactly(text)}")
    return "\n".join(lines)


def _still_as_shown(approval: ApprovalRequest) -> str | None:
    """None if what was shown still has the approval's digest, else why not."""
    from codemode.engine.approvals import canonical_json, text_digest

    digest = approval.digest
    file = approval.file
    if file:
        try:
            descriptor = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(descriptor, "rb") as handle:
                text = handle.read().decode("utf-8", "surrogatepass")
        except (OSError, UnicodeDecodeError) as error:
            return f"the arguments file cannot be read ({error})"
        if text_digest(text) != digest:
            return "the arguments file changed since it was shown"
        return None
    if text_digest(canonical_json(approval.arguments)) != digest:
        return "the arguments shown do not match the approval's digest"
    return None


def ask_on(terminal: TextIO, approval: ApprovalRequest) -> ApprovalAnswer:
    """Show the approval on ``terminal`` and read the answer from it."""
    from codemode.policy.grants import ApprovalAnswer

    server = shown_exactly(approval.server)
    terminal.write(render_approval(approval) + "\n")
    terminal.write(
        f"allow it? y = this call, t = this tool for the session, s = {server}'s calls of this "
        "kind for the session, N = no: "
    )
    terminal.flush()
    remember = _CHOICES.get(terminal.readline().strip().lower())
    if remember is None:
        return ApprovalAnswer(False)
    problem = _still_as_shown(approval)
    if problem is not None:
        terminal.write(f"codemode: not approved: {problem}; run the code again to see it anew\n")
        terminal.flush()
        return ApprovalAnswer(False)
    return ApprovalAnswer(True, remember)


def _open_terminal(path: Path) -> TextIO:
    """``path`` for reading and writing text. (``open(path, "r+")`` fails on every terminal:
    a terminal cannot seek, and Python's read-write buffer needs to.)"""
    descriptor = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        writer = io.FileIO(os.dup(descriptor), "w")
    except OSError:
        os.close(descriptor)
        raise
    pair = io.BufferedRWPair(io.FileIO(descriptor, "r"), writer)
    # typeshed's TextIOWrapper wants a name attribute that a pair of buffers does not have.
    buffer = cast(Any, pair)
    return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", line_buffering=True)


# The controlling terminal, where the prompt goes even when stdout and stderr are redirected.
TTY = Path("/dev/tty")


def decide(mode: str, approval: ApprovalRequest) -> ApprovalAnswer:
    """The ``--approve`` mode: ask on the terminal, approve all, or deny all."""
    from codemode.policy.grants import ApprovalAnswer

    if mode != "ask":
        return ApprovalAnswer(mode == "all")
    try:
        terminal = _open_terminal(TTY)
    except OSError:
        print(
            f"codemode: {shown_exactly(approval.tool)} needs approval and there is no "
            "terminal to ask; denied (use --approve all to allow)",
            file=sys.stderr,
        )
        return ApprovalAnswer(False)
    with terminal:
        return ask_on(terminal, approval)

"""A ``RunObserver`` that shows a run as it happens: each round's plan, code and result, then
the answer (or the escalation summary) and a ledger of rounds, tokens and time. Progress lines
(the model call started, still waiting, answered; tokens so far and time elapsed) go to
``progress``, stderr in the CLI, so a slow model never leaves the terminal silent."""

from __future__ import annotations

import time
from typing import TextIO

from codemode.agent.loop import RunObserver
from codemode.agent.record import Round, RunRecord, Step
from codemode.terminal_text import text_for_terminal

__all__ = ["LivePrinter"]

_SHOWN_LINES = 12


def _indent(text: str, limit: int = _SHOWN_LINES) -> str:
    lines = text.rstrip("\n").splitlines() or [""]
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"... ({len(lines) - limit} more lines)")
    return "\n".join(f"    {line}" if line.strip() else "" for line in shown)


def ledger_line(record: RunRecord) -> str:
    return (
        f"ledger: {record.status}, {len(record.rounds)} rounds, "
        f"{record.tokens_in:,} tokens in, {record.tokens_out:,} out, "
        f"{record.wall_ms / 1000:.1f} s (model {record.model_ms / 1000:.1f} s, "
        f"tools {record.tool_ms / 1000:.1f} s)"
    )


class LivePrinter(RunObserver):
    def __init__(self, out: TextIO, progress: TextIO | None = None) -> None:
        self.out = out
        self.progress = progress
        self._started = time.perf_counter()
        # The code's output, the model's words and file names reach a terminal shown, never
        # obeyed (``codemode.terminal_text``); a pipe or file gets them as they are.
        try:
            self.terminal = out.isatty()
        except (AttributeError, ValueError, OSError):
            self.terminal = False

    def _print(self, text: str) -> None:
        print(text_for_terminal(text) if self.terminal else text, file=self.out, flush=True)

    def _progress(self, text: str) -> None:
        if self.progress is not None:
            elapsed = time.perf_counter() - self._started
            print(f"codemode run: {text} [{elapsed:.1f} s elapsed]", file=self.progress, flush=True)

    def run_started(self, record: RunRecord) -> None:
        self._started = time.perf_counter()
        self._print(f"task: {record.task}\nmodel: {record.model} ({record.output_format})")

    def round_started(self, record: RunRecord, round_: Round) -> None:
        self._print(f"\n-- round {round_.index}/{record.max_rounds}")

    def model_asked(self, record: RunRecord, round_: Round) -> None:
        self._progress(
            f"round {round_.index}/{record.max_rounds}: asking {record.model} "
            f"(max {round_.max_tokens:,} tokens); so far {record.tokens_in:,} tokens in, "
            f"{record.tokens_out:,} out"
        )

    def model_waiting(self, record: RunRecord, round_: Round, waited_s: float) -> None:
        self._progress(f"round {round_.index}: still waiting for the model ({waited_s:.0f} s)")

    def model_replied(self, record: RunRecord, round_: Round) -> None:
        cut = ", cut at max_tokens" if round_.truncated else ""
        self._progress(
            f"round {round_.index}: the model answered in {round_.model_ms / 1000:.1f} s "
            f"({round_.tokens_in:,} tokens in, {round_.tokens_out:,} out{cut})"
        )
        if round_.thoughts:
            self._print("plan:\n" + _indent(round_.thoughts, 6))

    def step_done(self, record: RunRecord, round_: Round, step: Step) -> None:
        if step.kind == "execute" and step.code is not None:
            self._print("code:\n" + _indent(step.code))
        elif step.kind == "search":
            self._print(f"search: {step.query}")
        elif step.kind == "tool":
            self._print(f"call: {step.tool}")
        for decision in step.approvals:
            verdict = "allowed" if decision.allowed else "denied"
            self._print(f"approval: {decision.tool} {verdict}")
        label = "correction" if step.kind == "malformed" else "result"
        self._print(f"{label}:\n" + _indent(step.feedback, 8))

    def run_finished(self, record: RunRecord) -> None:
        self._print("")
        if record.status == "done":
            self._print("answer:\n" + _indent(record.answer or "", 40))
        elif record.status == "escalated":
            self._print("escalated:\n" + _indent(record.summary or "", 40))
        elif record.status == "interrupted":
            self._print(f"interrupted: {record.error}")
        else:
            self._print(f"failed: {record.error}")
        self._print(ledger_line(record))

"""The typed record of a run: every round's thoughts, code, result and tokens, and the outcome.

``RunRecord.to_dict()`` is what ``codemode run --json`` prints: at least ``status``
(done | escalated | failed | interrupted), ``rounds`` (a list) and ``answer``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["ApprovalRecord", "Round", "RunRecord", "RunStatus", "Step", "StepKind"]

# interrupted: SIGINT or SIGTERM stopped the run (``RoundLoop.interrupt``).
RunStatus = Literal["running", "done", "escalated", "failed", "interrupted"]
# search / execute: the codemode actions; tool: a baseline agent's tool call; answer: the end;
# malformed: an answer the loop could not use (it got a one-line correction).
StepKind = Literal["search", "execute", "tool", "answer", "malformed"]


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    tool: str
    arguments: Any
    reason: str
    allowed: bool


@dataclass(slots=True)
class Step:
    """One thing a round did. A round usually has one; native tool calling may ask for more."""

    kind: StepKind
    code: str | None = None
    query: str | None = None
    tool: str | None = None
    arguments: Any = None
    # The structured execution result (ExecutionResult.to_dict()), for execute steps.
    result: dict[str, Any] | None = None
    # What went back to the model, as it read it.
    feedback: str = ""
    problem: str | None = None
    approvals: list[ApprovalRecord] = field(default_factory=list)
    ms: float = 0.0

    @property
    def ok(self) -> bool:
        if self.kind == "execute":
            return self.result is not None and self.result.get("status") == "ok"
        return self.kind != "malformed" and self.problem is None


@dataclass(slots=True)
class Round:
    index: int
    thoughts: str = ""
    steps: list[Step] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    model_ms: float = 0.0
    # Time spent in tools: executions (approvals excluded), searches, baseline tool calls.
    tool_ms: float = 0.0
    # The max_tokens this round's model call was given (scaled to the run's time left).
    max_tokens: int = 0
    # The reply was cut at max_tokens (it got a correction, never ends the run).
    truncated: bool = False
    # Time waiting for the user to answer approvals.
    approval_ms: float = 0.0
    wall_ms: float = 0.0
    # The reply as the model wrote it (its text), for transcripts.
    reply: str = ""

    @property
    def code(self) -> str | None:
        codes = [step.code for step in self.steps if step.code is not None]
        return "\n\n".join(codes) if codes else None

    @property
    def result(self) -> dict[str, Any] | None:
        results = [step.result for step in self.steps if step.result is not None]
        return results[-1] if results else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["code"] = self.code
        data["result"] = self.result
        data["action"] = self.steps[0].kind if self.steps else None
        return data


@dataclass(slots=True)
class RunRecord:
    task: str
    model: str
    paradigm: str
    output_format: str
    max_rounds: int
    status: RunStatus = "running"
    answer: str | None = None
    # For an escalated run: what was tried, what failed last, what is needed.
    summary: str | None = None
    error: str | None = None
    rounds: list[Round] = field(default_factory=list)
    wall_ms: float = 0.0
    # Context fitting: results shortened and rounds dropped to stay under the budget.
    context_trims: int = 0
    session: str | None = None

    @property
    def tokens_in(self) -> int:
        return sum(r.tokens_in for r in self.rounds)

    @property
    def tokens_out(self) -> int:
        return sum(r.tokens_out for r in self.rounds)

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def model_ms(self) -> float:
        return sum(r.model_ms for r in self.rounds)

    @property
    def tool_ms(self) -> float:
        return sum(r.tool_ms for r in self.rounds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "answer": self.answer,
            "summary": self.summary,
            "error": self.error,
            "task": self.task,
            "model": self.model,
            "paradigm": self.paradigm,
            "output_format": self.output_format,
            "max_rounds": self.max_rounds,
            "rounds": [r.to_dict() for r in self.rounds],
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "wall_ms": round(self.wall_ms, 3),
            "model_ms": round(self.model_ms, 3),
            "tool_ms": round(self.tool_ms, 3),
            "context_trims": self.context_trims,
        }

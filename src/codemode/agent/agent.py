"""The codemode agent: plan, search the tool API, write code, run it, read the result, fix.

    async with Codemode(config) as engine:
        agent = Agent(engine, make_provider("anthropic:claude-sonnet-4-5"))
        record = await agent.run("Summarise sales.csv by month into result.md")
        print(record.status, record.answer)

The agent is one more client of the engine: one session per run (variables and files persist
across rounds), every execution goes through the sandbox, the policy, the privacy layer and the
audit log. A call that needs approval pauses the execution; ``approve`` (a callback) answers
it, and a denied call reaches the model as the tool error it raises in the code.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from codemode.agent.actions import Action, Execute, Search
from codemode.agent.feedback import render_execution, render_search
from codemode.agent.formats import OutputFormat, make_format
from codemode.agent.loop import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROGRESS_INTERVAL_S,
    Approver,
    RoundLoop,
    RunObserver,
)
from codemode.agent.providers.base import ModelProvider
from codemode.agent.record import Round, RunRecord, Step
from codemode.errors import CodemodeError, UnknownSessionError
from codemode.policy.approval import ApprovalDecision
from codemode.settings.agent import OutputFormatName

if TYPE_CHECKING:
    from codemode.engine import Codemode
    from codemode.sandbox.result import ExecutionResult

__all__ = ["Agent", "system_prompt"]


def system_prompt(
    output_format: OutputFormat, servers: list[str], max_rounds: int, listing: str | None = None
) -> str:
    """The codemode agent's instructions. ``listing`` (every function of a small catalog, as
    ``search.listing`` renders it) makes them short and goes at the end: the model needs no
    search round, and a small task should not pay for a guide written for hundreds of tools."""
    if listing:
        return "\n".join(
            [
                "Solve the task with Python run in a sandbox; variables and files persist. Print "
                "only what you need. A failed tool call raises ToolError; help(f) shows f's docs. "
                f"At most {max_rounds} rounds. {output_format.instructions()}",
                "The functions (all of them):",
                listing,
            ]
        )
    listed = ", ".join(servers) if servers else "none configured"
    lines = [
        "You solve the user's task by writing Python that runs in a sandbox.",
        f"Tools are Python functions grouped by server ({listed}): "
        "`from servers import NAME`, then call `NAME.function(...)`. Use search to find the "
        "functions and their signatures. A failed tool call raises ToolError.",
        "How to work:",
        "1. Plan first: say in a few lines what you will do.",
        "2. Organise the code in small functions called at the end, so a fix stays local.",
        "3. Print only what you need to see; keep data in variables and files (both "
        "persist between runs). The working directory is the workspace.",
        "4. Read each result (status, error and line, output, files, hint) and fix what failed.",
        "5. When the task is done, give a short final answer: what you did, where the results are.",
        f"You have at most {max_rounds} rounds.",
        output_format.instructions(),
    ]
    return "\n".join(lines)


class Agent(RoundLoop):
    """``Agent(engine, model).run(task)`` -> ``RunRecord``. See the module docs."""

    paradigm = "codemode"

    def __init__(
        self,
        engine: Codemode,
        model: ModelProvider,
        *,
        output_format: OutputFormatName | OutputFormat | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        approve: Approver | None = None,
        observer: RunObserver | None = None,
        execution_timeout_s: float | None = None,
        context_tokens: int = 100_000,
        max_tokens: int = 4096,
        keep_session: bool = False,
        run_timeout_s: float | None = None,
        progress_interval_s: float = DEFAULT_PROGRESS_INTERVAL_S,
    ) -> None:
        if output_format is None:
            output_format = "tools" if model.supports_tools else "json"
        if isinstance(output_format, str):
            output_format = make_format(output_format)
        super().__init__(
            model,
            output_format,
            max_rounds=max_rounds,
            approve=approve,
            observer=observer,
            context_tokens=context_tokens,
            max_tokens=max_tokens,
            run_timeout_s=run_timeout_s,
            progress_interval_s=progress_interval_s,
        )
        self.engine = engine
        self.execution_timeout_s = execution_timeout_s
        self.keep_session = keep_session
        self.session: str | None = None

    def system_prompt(self) -> str:
        from codemode.search.listing import small_catalog_listing

        listing = small_catalog_listing(self.engine.catalog.specs())
        # Asked once per run, before the first round: the tools offered follow the prompt.
        self.format = self.format.for_catalog(listed=listing is not None)
        return system_prompt(self.format, self.engine.catalog.servers, self.max_rounds, listing)

    async def start(self) -> None:
        self.session = None

    async def stop(self, record: RunRecord) -> None:
        record.session = self.session
        if self.session is not None and not self.keep_session:
            await self.engine.close_session(self.session)

    async def act(self, action: Action, round_: Round) -> tuple[Step, str, bool]:
        started, waited = time.perf_counter(), round_.approval_ms
        try:
            if isinstance(action, Search):
                return await self._search(action)
            if isinstance(action, Execute):
                return await self._execute(action, round_)
            raise TypeError(f"not an action for the codemode agent: {action!r}")
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            round_.tool_ms += elapsed - (round_.approval_ms - waited)

    async def _search(self, action: Search) -> tuple[Step, str, bool]:
        step = Step("search", query=action.query)
        try:
            answer = await self.engine.search(
                action.query, detail=action.detail, limit=action.limit
            )
        except CodemodeError as error:
            step.problem = str(error)
            return step, f"search failed: {error}", True
        return step, render_search(answer.text, len(answer.hits)), False

    async def _execute(self, action: Execute, round_: Round) -> tuple[Step, str, bool]:
        step = Step("execute", code=action.code)
        note = ""
        try:
            result = await self._run_code(action.code, round_, step)
        except UnknownSessionError:
            # The session expired between rounds: start a new one and say so.
            self.session = None
            note = "note: the session had expired; this ran in a new one (variables and files "
            note += "from before are gone)\n"
            result = await self._run_code(action.code, round_, step)
        data = result.to_dict()
        data.pop("session", None)
        step.result = data
        text = note + render_execution(data, step.approvals)
        return step, text, result.status != "ok"

    async def _run_code(self, code: str, round_: Round, step: Step) -> ExecutionResult:
        result = await self.engine.execute(
            code, session=self.session, timeout_s=self.execution_timeout_s
        )
        self.session = result.session or self.session
        while result.approval is not None:
            request = result.approval
            answer = await self.decide(request, round_, step)
            result = await self.engine.decide(ApprovalDecision.answering(request, answer))
        return result

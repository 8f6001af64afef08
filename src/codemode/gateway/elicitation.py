"""Approvals the person behind the client answers (MCP elicitation), never the model.

When an execution pauses at a call that needs a human and the client declared elicitation,
the gateway asks the client's user instead of returning ``approval_required`` to the model:

- a client with a back-channel (2025-era connections) gets an ``elicitation/create`` request
  while its ``execute`` call waits, with progress still reported;
- a 2026-07-28 client (no back-channel) gets an ``InputRequiredResult`` holding the same
  request; its retry carries the answer (``input_responses``) and the approval's id
  (``request_state``) and resumes the paused execution: the code does not run again.

The request is a form (allow once, allow the tool for the session, deny), or in URL mode a
link to the approval page (``gateway.web``), where the decision is taken. "Allow the tool" is
the approval API's ``remember="tool"``. The model only ever sees the outcome. Approvals asked
this way are reserved: the ``approve`` tool refuses them, so a model cannot answer its own
call while the person decides.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp import types

from codemode.engine import Codemode
from codemode.engine.progress import Progress
from codemode.errors import ApprovalReservedError, SessionError
from codemode.gateway.reserved import Reservations
from codemode.gateway.web.reveal import mint_page
from codemode.policy.approval import ApprovalDecision, ApprovalRequest
from codemode.sandbox.result import ExecutionResult
from codemode.settings.policy import ApprovalsMode

if TYPE_CHECKING:
    from codemode.gateway.web.links import ApprovalLinks

__all__ = [
    "APPROVAL_INPUT",
    "Ask",
    "ApprovalRouter",
    "UserChannel",
    "approval_form",
    "decision_of",
]

log = logging.getLogger(__name__)

# The key of the approval form among an InputRequiredResult's input requests.
APPROVAL_INPUT = "approval"
# request_state of a round that waits for an approval: this prefix and the approval's id.
_STATE_PREFIX = "codemode-approval:"
_MESSAGE_ARGUMENT_CHARS = 2000
# The end of what the code printed before the pause (a count it is about to act on).
_MESSAGE_PRINTED_CHARS = 1000

# Sends a form (message, requested schema) to the client's user and returns their answer.
Ask = Callable[[str, dict[str, Any]], Awaitable[types.ElicitResult]]
# Sends the user to a URL (message, url, elicitation id) and returns whether they went.
AskUrl = Callable[[str, str, str], Awaitable[types.ElicitResult]]
Remember = Literal["call", "tool"]
Route = Literal["tool", "ask", "url", "deny"]


@dataclass(frozen=True)
class UserChannel:
    """How this request reaches the person behind the client (who declared elicitation).

    ``ask`` sends a form over the back-channel and waits; None means the client answers in
    rounds (``InputRequiredResult``), whose answer arrives as ``responses`` with ``state``.
    """

    form: bool
    url: bool
    ask: Ask | None = None
    responses: Mapping[str, Any] | None = None
    state: str | None = None
    ask_url: AskUrl | None = None

    @property
    def resuming(self) -> str | None:
        """The approval id this request answers (a retry round), if it is one of ours."""
        if self.state is not None and self.state.startswith(_STATE_PREFIX):
            return self.state[len(_STATE_PREFIX) :]
        return None


def approval_form(approval: ApprovalRequest, printed: str = "") -> tuple[str, dict[str, Any]]:
    """The message and requested schema that describe a paused call to its approver, with the
    end of what the code ``printed`` before the pause."""
    tool = approval.tool
    arguments = json.dumps(approval.arguments, ensure_ascii=False, indent=1)
    if len(arguments) > _MESSAGE_ARGUMENT_CHARS:
        arguments = arguments[:_MESSAGE_ARGUMENT_CHARS] + f"... ({len(arguments):,} characters)"
    lines = [
        f"The agent's code paused before {tool}, which needs your approval.",
        f"Why: {approval.reason}",
        f"Arguments (personal data shown as tokens):\n{arguments}",
    ]
    printed = printed.rstrip("\n")
    if printed:
        if len(printed) > _MESSAGE_PRINTED_CHARS:
            printed = (
                f"({len(printed):,} characters, the last shown) ..."
                + printed[-_MESSAGE_PRINTED_CHARS:]
            )
        lines.append(f"The code printed before this call:\n{printed}")
    lines += [f"Digest: {approval.digest}", f"Approval: {approval.id}"]
    message = "\n".join(lines)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": f"Run {tool} with these arguments?",
                "oneOf": [
                    {"const": "allow_call", "title": "Allow this call once"},
                    {"const": "allow_tool", "title": f"Allow {tool} for the rest of the session"},
                    {"const": "deny", "title": "Deny (the code gets a ToolError)"},
                ],
            }
        },
        "required": ["decision"],
    }
    return message, schema


def decision_of(answer: object) -> tuple[bool, Remember]:
    """(allow, remember) from the client's answer; anything but an accepted allow denies."""
    if isinstance(answer, Mapping):
        try:
            answer = types.ElicitResult.model_validate(answer)
        except ValueError:
            return False, "call"
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
        return False, "call"
    decision = (answer.content or {}).get("decision")
    if decision == "allow_call":
        return True, "call"
    if decision == "allow_tool":
        return True, "tool"
    return False, "call"


def _accepted(answer: object) -> bool:
    if isinstance(answer, Mapping):
        return answer.get("action") == "accept"
    return isinstance(answer, types.ElicitResult) and answer.action == "accept"


class _Rising:
    """Progress values that only grow along one request, across the phases that report."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._last = 0.0

    async def __call__(self, value: float, total: float | None, message: str) -> None:
        self._last = max(value, self._last + 0.001)
        await self._progress(round(self._last, 3), total, message)


class ApprovalRouter:
    """Decides who answers each approval an execution pauses at, and asks them."""

    def __init__(
        self,
        engine: Codemode,
        mode: ApprovalsMode | None = None,
        *,
        links: ApprovalLinks | None = None,
    ) -> None:
        self.engine = engine
        self.mode: ApprovalsMode = mode or engine.config.policy.approvals
        # The approval page's links (HTTP gateways): "url" sends the user there.
        self.links = links
        # Approvals asked of a person: the approve tool must not answer them.
        self._asked: dict[str, ApprovalRequest] = {}
        self._printed: dict[str, str] = {}  # approval id -> what the code printed before it
        self._reserved = Reservations(engine)

    def route(self, user: UserChannel | None) -> Route:
        if self.mode == "tool":
            return "tool"
        if user is not None:
            # The page where asked for (or where the client has no form mode), else the form.
            if user.url and self.links is not None and (self.mode == "url" or not user.form):
                return "url"
            if user.form:
                return "ask"
        # "elicit" and "url" never let the model answer: without a person to ask, deny.
        return "tool" if self.mode == "auto" else "deny"

    async def check_model_may_answer(self, approval_id: str) -> None:
        """Raise when the ``approve`` tool may not answer ``approval_id``."""
        if await self._reserved.holds(approval_id):
            raise ApprovalReservedError(
                f"approval {approval_id[:16]!r} is being decided by the user through their "
                "client (MCP elicitation); the approve tool cannot answer it",
                fix="wait for the execute call to return: it resumes once the user decides",
            )
        if self.mode in ("elicit", "url"):
            raise ApprovalReservedError(
                f"approval {approval_id[:16]!r} can only be answered by a person "
                f'(policy.approvals = "{self.mode}"), not with the approve tool',
                fix='use a client that supports MCP elicitation, or set policy.approvals = "auto"',
            )

    async def settle(
        self,
        result: ExecutionResult,
        user: UserChannel | None,
        owner: str | None,
        progress: Progress | None,
    ) -> ExecutionResult | types.InputRequiredResult:
        """Follow ``result`` through every approval it pauses at that a person answers:
        the final result, or an ``InputRequiredResult`` for a client answering in rounds."""
        if progress is not None and not isinstance(progress, _Rising):
            progress = _Rising(progress)
        while (approval := result.approval) is not None:
            route = self.route(user)
            if route == "tool":
                return result
            if route == "deny":
                result = await self._decide(approval, False, "call", owner, progress)
                hint = (
                    f"{approval.tool} was denied: policy.approvals = {self.mode!r} needs a "
                    f"client that supports MCP elicitation to ask its user. {result.hint}"
                ).strip()
                result = replace(result, hint=hint)
                continue
            assert user is not None
            self._asked[approval.id] = approval
            # A paused result's stdout is what the code printed before the pause.
            self._printed[approval.id] = result.stdout
            await self._reserved.add(approval.id)
            if route == "url":
                url = self._page_for(approval, owner, result.session, result.stdout)
                if user.ask_url is None:
                    return self._input_required(approval, url)
                allow, remember = await self._ask_page(user.ask_url, approval, url, progress)
            elif user.ask is None:
                return self._input_required(approval)
            else:
                allow, remember = await self._ask_inline(user.ask, approval, progress)
            result = await self._decide(approval, allow, remember, owner, progress)
        return result

    def _page_for(
        self, approval: ApprovalRequest, owner: str | None, session: str | None, printed: str
    ) -> str:
        assert self.links is not None
        link = mint_page(self.links, self.engine, approval, owner, session, printed)
        return self.links.url(link)

    async def _ask_page(
        self, ask_url: AskUrl, approval: ApprovalRequest, url: str, progress: Progress | None
    ) -> tuple[bool, Remember]:
        """Send the user to the approval page and wait for the decision made there."""
        assert self.links is not None
        message = f"Approve or deny {approval.tool} on codemode's approval page."
        try:
            went = await ask_url(message, url, approval.id)
        except Exception:
            log.warning("sending the user to the approval page failed: denied", exc_info=True)
            return False, "call"
        if went.action != "accept":
            return False, "call"
        return await self._page_decision(approval.id, approval.tool, progress)

    async def _page_decision(
        self, approval_id: str, tool: str, progress: Progress | None
    ) -> tuple[bool, Remember]:
        assert self.links is not None
        decided: list[str] = []
        async with anyio.create_task_group() as group:
            if progress is not None:
                group.start_soon(self._report_waiting, progress, tool)
            decided.append(await self.links.wait(approval_id))
            group.cancel_scope.cancel()
        return decided[0] != "deny", "tool" if decided[0] == "allow_tool" else "call"

    async def resume(
        self, user: UserChannel, owner: str | None, progress: Progress | None
    ) -> ExecutionResult | types.InputRequiredResult:
        """A retry round: answer the approval it names with the user's answer, follow on."""
        approval_id = user.resuming
        approval = self._asked.get(approval_id or "")
        if approval is None:
            raise SessionError(
                f"approval {str(approval_id)[:16]!r} is not waiting for an answer here",
                fix="run the code again: the paused execution was answered or has ended",
            )
        answer = (user.responses or {}).get(APPROVAL_INPUT)
        link = self.links.by_approval(approval.id) if self.links is not None else None
        if answer is None:
            url = self.links.url(link) if self.links is not None and link is not None else None
            return self._input_required(approval, url)
        if link is not None:
            # URL mode: the answer says the user went to the page; the page holds the decision.
            went = _accepted(answer)
            allow, remember = (
                await self._page_decision(approval.id, approval.tool, progress)
                if went
                else (False, "call")
            )
        else:
            allow, remember = decision_of(answer)
        result = await self._decide(approval, allow, remember, owner, progress)
        return await self.settle(result, user, owner, progress)

    def _input_required(
        self, approval: ApprovalRequest, url: str | None = None
    ) -> types.InputRequiredResult:
        params: types.ElicitRequestFormParams | types.ElicitRequestURLParams
        if url is not None:
            params = types.ElicitRequestURLParams(
                message=f"Approve or deny {approval.tool} on codemode's approval page.",
                url=url,
                elicitation_id=approval.id,
            )
        else:
            message, schema = approval_form(approval, self._printed.get(approval.id, ""))
            params = types.ElicitRequestFormParams(message=message, requested_schema=schema)
        request = types.ElicitRequest(params=params)
        return types.InputRequiredResult(
            input_requests={APPROVAL_INPUT: request},
            request_state=_STATE_PREFIX + approval.id,
        )

    async def _ask_inline(
        self, ask: Ask, approval: ApprovalRequest, progress: Progress | None
    ) -> tuple[bool, Remember]:
        message, schema = approval_form(approval, self._printed.get(approval.id, ""))
        answers: list[types.ElicitResult] = []
        async with anyio.create_task_group() as group:
            if progress is not None:
                group.start_soon(self._report_waiting, progress, approval.tool)
            try:
                answers.append(await ask(message, schema))
            except Exception:
                # A client that declared elicitation but failed to ask: nobody decided.
                log.warning("asking the user for %s failed: denied", approval.tool, exc_info=True)
            group.cancel_scope.cancel()
        return decision_of(answers[0]) if answers else (False, "call")

    async def _report_waiting(self, progress: Progress, tool: str) -> None:
        interval = self.engine.config.gateway.progress_interval_s
        started = time.monotonic()
        while True:
            await anyio.sleep(interval)
            elapsed = time.monotonic() - started
            try:
                await progress(
                    elapsed, None, f"waiting {elapsed:.0f} s for the user to decide {tool}"
                )
            except Exception:
                log.debug("progress report failed; no more reports", exc_info=True)
                return

    async def _decide(
        self,
        approval: ApprovalRequest,
        allow: bool,
        remember: Remember,
        owner: str | None,
        progress: Progress | None,
    ) -> ExecutionResult:
        decision = ApprovalDecision(approval.id, allow, remember, approval.digest, owner)
        try:
            return await self.engine.decide(decision, progress)
        finally:
            self._asked.pop(approval.id, None)
            self._printed.pop(approval.id, None)
            await self._reserved.discard(approval.id)

"""The gateway's three tools as a plain class: arguments in, ``CallToolResult`` out.

Nothing here knows the SDK's ``Server`` or request context: ``server.py`` turns a request into
a ``Caller`` and hands it over, so the handlers can be tested and traced on their own.
"""

from __future__ import annotations

import functools
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from mcp import MCPError, types

from codemode.engine import Codemode
from codemode.engine.progress import Progress
from codemode.errors import CodemodeError, UnknownSessionError
from codemode.gateway.elicitation import ApprovalRouter, UserChannel
from codemode.gateway.quiet_releases import QuietReleases
from codemode.gateway.resources import WorkspaceResources
from codemode.gateway.structured import search_structured
from codemode.gateway.web.ledger import TokenLedger
from codemode.gateway.web.links import ApprovalLinks
from codemode.policy.grants import REMEMBER_CHOICES
from codemode.sandbox.result import ExecutionResult
from codemode.search.render import DEFAULT_HEAD

__all__ = ["Caller", "GatewayHandlers", "TOOL_NAMES"]

log = logging.getLogger(__name__)

TOOL_NAMES = ("search", "execute", "approve")


# Registers a coroutine function to run when a 2025-era client's connection ends.
OnClose = Callable[[Callable[[], Awaitable[None]]], object]


@dataclass(frozen=True)
class Caller:
    """Who sent a request, as far as the transport tells.

    ``owner`` binds sessions and approvals (the bearer token's owner, or None);
    ``connection`` is the object that lives as long as a 2025-era client's connection, the
    only stable key for one; ``legacy`` is true for those clients, which never pass handles.
    ``client`` names the client where the transport identifies it (a token's owner, the one
    stdio client): the quota its sessions count against. ``progress`` reports progress to
    the client, when it asked for it. ``on_close`` runs cleanup when a 2025-era HTTP
    connection ends (its DELETE, or the transport's own idle timeout). ``user`` reaches the
    person behind the client, when it declared elicitation.
    """

    owner: str | None = None
    connection: object | None = None
    legacy: bool = False
    client: str | None = None
    progress: Progress | None = None
    on_close: OnClose | None = None
    user: UserChannel | None = None


# What a tool call answers: its result, or (2026 clients) a round asking the user first.
Answer = types.CallToolResult | types.InputRequiredResult


def text_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _argument_error(message: str) -> types.CallToolResult:
    return text_result(f"invalid arguments: {message}", error=True)


def execution_result(result: ExecutionResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.render_text())],
        structured_content=result.to_structured(),
        is_error=result.status not in ("ok", "approval_required"),
    )


class GatewayHandlers:
    def __init__(
        self,
        engine: Codemode,
        *,
        links: ApprovalLinks | None = None,
        ledger: TokenLedger | None = None,
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self.resources = WorkspaceResources(engine, images=engine.config.gateway.result_images)
        self.approvals = ApprovalRouter(engine, links=links)
        # A 2025-era connection is one agent's conversation: its calls without a handle reuse
        # the session the connection used before, released when the connection ends.
        # A 2026-era request identifies no agent (a token may serve many; stateless, no
        # connection): a call without a handle gets a new session, whose handle its result
        # carries for the agent to pass back. Two agents never share a session by accident.
        self._connection_sessions: weakref.WeakKeyDictionary[object, str] = (
            weakref.WeakKeyDictionary()
        )
        # The sessions of connections that ended, released once the clients still arriving
        # are served (``quiet_releases``).
        self.releases = QuietReleases(self._release_now)

    def expect_session(self) -> None:
        """A client connected, listed or searched: its session is likely soon, so the
        sandboxes get ready for it (a warm pool back from idle). Cheap and never blocking;
        before the engine started there is nothing to ready. A provider that fails at it
        fails no request: the session starts its sandbox when it asks, as before."""
        sandboxes = self.engine.sandboxes
        if sandboxes is None:
            return
        try:
            sandboxes.expect()
        except Exception:
            log.exception("the sandboxes could not get ready for a coming session")

    async def call(self, name: str, arguments: dict[str, Any], caller: Caller) -> Answer:
        answer = await self._call(name, arguments, caller)
        if self.ledger is not None and isinstance(answer, types.CallToolResult):
            self._record(name, arguments, caller, answer)
        return answer

    def _record(
        self, name: str, arguments: dict[str, Any], caller: Caller, answer: types.CallToolResult
    ) -> None:
        """The tokens this exchange put in the model's context: its arguments and the text."""
        from codemode.tokens import count_tokens

        assert self.ledger is not None
        sent = json.dumps(arguments, ensure_ascii=False)
        text = "\n".join(getattr(block, "text", "") for block in answer.content)
        structured = answer.structured_content or {}
        session = structured.get("session") if isinstance(structured, dict) else None
        key = str(session) if session else f"{name}:{caller.owner or '-'}"
        self.ledger.record(key, caller.owner, count_tokens(sent) + count_tokens(text))

    async def _call(self, name: str, arguments: dict[str, Any], caller: Caller) -> Answer:
        if name not in TOOL_NAMES:
            # A protocol error (JSON-RPC -32602), as the MCP spec shows for an unknown tool.
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {name!r}; the tools are search, execute and approve",
            )
        try:
            if caller.user is not None and caller.user.resuming is not None:
                # A retry carrying the user's answer: resume the paused execution, never
                # run the call's code again.
                resumed = await self.approvals.resume(caller.user, caller.owner, caller.progress)
                return await self._answer(resumed, caller)
            if name == "search":
                return await self.search(arguments, caller)
            if name == "execute":
                return await self.execute(arguments, caller)
            if name == "approve":
                return await self.approve(arguments, caller)
        except CodemodeError as error:
            return text_result(str(error), error=True)
        except Exception:
            log.exception("%s failed", name)
            return text_result(f"{name} failed inside codemode; see the gateway's log", error=True)
        raise AssertionError(name)  # every name in TOOL_NAMES is handled above

    async def search(self, arguments: dict[str, Any], caller: Caller) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _argument_error("`query` must be a non-empty string, e.g. 'create an issue'")
        detail = arguments.get("detail", "summary")
        limit = arguments.get("limit", DEFAULT_HEAD)
        part = arguments.get("part", 1)
        if not isinstance(detail, str):
            return _argument_error("`detail` must be one of: name, summary, full")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _argument_error("`limit` must be a positive integer")
        if not isinstance(part, int) or isinstance(part, bool) or part < 1:
            return _argument_error("`part` must be a positive integer, e.g. 2 for the rest")
        answer = await self.engine.search(
            query,
            detail=detail,
            limit=limit,
            part=part,
            owner=caller.owner,
            progress=caller.progress,
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)],
            structured_content={
                **search_structured(answer.hits, detail, more=answer.more),
                **({"lexical_only": True} if answer.lexical_only else {}),
            },
        )

    async def execute(self, arguments: dict[str, Any], caller: Caller) -> Answer:
        code = arguments.get("code")
        session = arguments.get("session")
        fresh = arguments.get("fresh", False)
        fresh_dir = arguments.get("fresh_dir", False)
        check = arguments.get("check", True)
        if not isinstance(code, str):
            return _argument_error("`code` must be a string of Python source")
        if session is not None and not isinstance(session, str):
            return _argument_error("`session` must be the string handle from an earlier result")
        if not isinstance(fresh, bool):
            return _argument_error("`fresh` must be true or false")
        if not isinstance(check, bool):
            return _argument_error("`check` must be true or false")
        if not isinstance(fresh_dir, bool):
            return _argument_error("`fresh_dir` must be true or false")
        remember = self._remembered(caller) if session is None else None
        if remember is not None:
            session = remember.get()
        if session == NEW_SESSION:
            # Another session beside the caller's default one, which stays the default.
            session = None

        async def run(handle: str | None) -> ExecutionResult:
            self.releases.touch()
            return await self.engine.execute(
                code,
                session=handle,
                fresh=fresh,
                owner=caller.owner,
                client=caller.client,
                progress=caller.progress,
                opened=self._keeper(remember, caller) if remember is not None else None,
                check=check,
                fresh_dir=fresh_dir,
            )

        try:
            result = await run(session)
        except UnknownSessionError:
            if remember is None or session is None:
                raise
            # The remembered session expired: start a new one rather than fail forever.
            result = await run(None)
        settled = await self.approvals.settle(result, caller.user, caller.owner, caller.progress)
        return await self._answer(settled, caller)

    async def _answer(
        self, result: ExecutionResult | types.InputRequiredResult, caller: Caller
    ) -> Answer:
        if isinstance(result, types.InputRequiredResult):
            return result
        answer = execution_result(result)
        answer.content.extend(await self.resources.attachments(result, caller.owner))
        return answer

    async def approve(self, arguments: dict[str, Any], caller: Caller) -> Answer:
        approval, allow = arguments.get("approval"), arguments.get("allow")
        if not isinstance(approval, str) or not isinstance(allow, bool):
            return _argument_error("`approval` (the id from the result) and `allow` (true/false)")
        await self.approvals.check_model_may_answer(approval)
        digest = arguments.get("digest")  # optional: the digest shown with the approval
        remember = arguments.get("remember", "call")
        if remember not in REMEMBER_CHOICES:
            return _argument_error(
                '`remember` must be "call" (default), "tool" or "server", e.g. remember="tool"'
            )
        result = await self.engine.approve(
            approval,
            allow,
            owner=caller.owner,
            digest=digest if isinstance(digest, str) else None,
            progress=caller.progress,
            remember=remember,
        )
        settled = await self.approvals.settle(result, caller.user, caller.owner, caller.progress)
        return await self._answer(settled, caller)

    def _remembered(self, caller: Caller) -> _Remembered | None:
        """Where a handle-less call finds its session: a 2025-era client's connection;
        None (a new session, its handle in the result) for everyone else."""
        if caller.legacy and caller.connection is not None:
            return _Remembered(self._connection_sessions, caller.connection)
        return None

    def _keeper(self, remember: _Remembered, caller: Caller) -> Callable[[str], None]:
        """Remembers the connection's session; a new one is released when the connection
        ends, so it stops counting against its client's quota at once."""

        def keep(handle: str) -> None:
            if remember.get() == handle:
                return
            remember.set(handle)
            if caller.on_close is not None:
                caller.on_close(functools.partial(self._connection_ended, handle))

        return keep

    async def _connection_ended(self, handle: str) -> None:
        # Not awaited, and on a thread of the queue's: the transport bounds its cleanup, a
        # checkpoint may take longer, and a gateway that stops must not wait for one.
        self.releases.add(handle)

    def _release_now(self, handle: str) -> None:
        registry = self.engine.registry
        if registry is not None and registry.release_now(handle):
            log.info("connection ended: session %s was checkpointed and released", handle[:12])


# ``execute(session="new")``: open another session (a handle-less call keeps its default one).
NEW_SESSION = "new"


@dataclass(frozen=True)
class _Remembered:
    table: MutableMapping[Any, str]
    key: object

    def get(self) -> str | None:
        return self.table.get(self.key)

    def set(self, handle: str) -> None:
        self.table[self.key] = handle

"""The gateway's three tools as a plain class: arguments in, ``CallToolResult`` out.

Nothing here knows the SDK's ``Server`` or request context: ``server.py`` turns a request into
a ``Caller`` and hands it over, so the handlers can be tested and traced on their own.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

from mcp import types

from codemode.engine import Codemode
from codemode.errors import CodemodeError, UnknownSessionError
from codemode.gateway.structured import search_structured
from codemode.sandbox.result import ExecutionResult

__all__ = ["Caller", "GatewayHandlers", "TOOL_NAMES"]

log = logging.getLogger(__name__)

TOOL_NAMES = ("search", "execute", "approve")


@dataclass(frozen=True)
class Caller:
    """Who sent a request, as far as the transport tells.

    ``owner`` binds sessions and approvals (a digest of the HTTP credentials, or None);
    ``connection`` is the object that lives as long as a 2025-era client's connection, the
    only stable key for one; ``legacy`` is true for those clients, which never pass handles.
    """

    owner: str | None = None
    connection: object | None = None
    legacy: bool = False


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
    def __init__(self, engine: Codemode) -> None:
        self.engine = engine
        # 2025-era clients keep one connection per conversation: a call without a handle
        # reuses the session this connection used before. 2026 clients pass the handle back.
        self._connection_sessions: weakref.WeakKeyDictionary[object, str] = (
            weakref.WeakKeyDictionary()
        )

    async def call(
        self, name: str, arguments: dict[str, Any], caller: Caller
    ) -> types.CallToolResult:
        try:
            if name == "search":
                return await self.search(arguments)
            if name == "execute":
                return await self.execute(arguments, caller)
            if name == "approve":
                return await self.approve(arguments, caller)
        except CodemodeError as error:
            return text_result(str(error), error=True)
        except Exception:
            log.exception("%s failed", name)
            return text_result(f"{name} failed inside codemode; see the gateway's log", error=True)
        return text_result(
            f"unknown tool {name!r}; the tools are search, execute and approve", error=True
        )

    async def search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _argument_error("`query` must be a non-empty string, e.g. 'create an issue'")
        detail = arguments.get("detail", "summary")
        limit = arguments.get("limit", 5)
        if not isinstance(detail, str):
            return _argument_error("`detail` must be one of: name, summary, full")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _argument_error("`limit` must be a positive integer")
        answer = await self.engine.search(query, detail=detail, limit=limit)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)],
            structured_content=search_structured(answer.hits, detail),
        )

    async def execute(self, arguments: dict[str, Any], caller: Caller) -> types.CallToolResult:
        code = arguments.get("code")
        session = arguments.get("session")
        fresh = arguments.get("fresh", False)
        check = arguments.get("check", True)
        if not isinstance(code, str):
            return _argument_error("`code` must be a string of Python source")
        if session is not None and not isinstance(session, str):
            return _argument_error("`session` must be the string handle from an earlier result")
        if not isinstance(fresh, bool):
            return _argument_error("`fresh` must be true or false")
        if not isinstance(check, bool):
            return _argument_error("`check` must be true or false")
        remembered = self._connection_sessions if caller.connection is not None else None
        implicit = session is None and caller.legacy and remembered is not None
        if implicit and remembered is not None:
            session = remembered.get(caller.connection)
        engine = self.engine
        try:
            result = await engine.execute(
                code, session=session, fresh=fresh, owner=caller.owner, check=check
            )
        except UnknownSessionError:
            if not (implicit and session):
                raise
            # The connection's session expired: start a new one rather than fail forever.
            result = await engine.execute(code, fresh=fresh, owner=caller.owner, check=check)
        if caller.legacy and remembered is not None and result.session:
            remembered[caller.connection] = result.session
        return execution_result(result)

    async def approve(self, arguments: dict[str, Any], caller: Caller) -> types.CallToolResult:
        approval, allow = arguments.get("approval"), arguments.get("allow")
        if not isinstance(approval, str) or not isinstance(allow, bool):
            return _argument_error("`approval` (the id from the result) and `allow` (true/false)")
        result = await self.engine.approve(approval, allow, owner=caller.owner)
        return execution_result(result)

"""The operator console: sessions, pending approvals, the audit log and the token ledger.

Under the gateway's own authentication: a bearer token whose owner is one of
``[gateway] operators``, sent as ``Authorization: Bearer`` or typed once into the sign-in form
(which keeps an HttpOnly, SameSite=Strict cookie naming a console session of 8 hours).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from codemode.audit.events import DECISIONS, OUTCOMES, AuditFilter
from codemode.gateway.auth import Verifier
from codemode.gateway.web.app import PAGE_HEADERS, same_origin
from codemode.gateway.web.console_page import (
    ApprovalRow,
    SessionRow,
    SkillRow,
    audit_page,
    login_page,
    overview_page,
)
from codemode.gateway.web.ledger import TokenLedger
from codemode.gateway.web.page import message_page

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["PREFIX", "OperatorConsole"]

PREFIX = "/console"
_COOKIE = "codemode_console"
_SIGNED_IN_S = 8 * 3600.0


class OperatorConsole:
    def __init__(
        self,
        engine: Codemode,
        verifiers: Sequence[Verifier],
        operators: Sequence[str],
        ledger: TokenLedger,
    ) -> None:
        self.engine = engine
        self.verifiers = tuple(verifiers)
        self.operators = frozenset(operators)
        self.ledger = ledger
        self._signed_in: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def handles(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        path = request.url.path
        if path == PREFIX + "/login" and request.method == "POST":
            return await self._sign_in(request)
        operator = await self._operator(request)
        if operator is None:
            return HTMLResponse(login_page(), 401, headers=PAGE_HEADERS)
        if path == PREFIX + "/logout" and request.method == "POST":
            if not same_origin(request):
                return HTMLResponse(message_page("Refused", "sign out from the console"), 403)
            with self._lock:
                self._signed_in.pop(request.cookies.get(_COOKIE, ""), None)
            response: Response = RedirectResponse(PREFIX, 303, headers=PAGE_HEADERS)
            response.delete_cookie(_COOKIE, path=PREFIX)
            return response
        if request.method != "GET":
            return HTMLResponse(message_page("Not allowed", "use GET"), 405, headers=PAGE_HEADERS)
        if path == PREFIX:
            # Skills and the audit log are read from disk (or the shared store): off the loop.
            return HTMLResponse(
                await anyio.to_thread.run_sync(self._overview), headers=PAGE_HEADERS
            )
        if path == PREFIX + "/audit":
            audit = await anyio.to_thread.run_sync(self._audit, request)
            return HTMLResponse(audit, headers=PAGE_HEADERS)
        return HTMLResponse(message_page("Not found", "no such console page"), 404)

    async def _operator(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return await self._verify(token.strip())
        cookie = request.cookies.get(_COOKIE)
        if not cookie:
            return None
        with self._lock:
            signed = self._signed_in.get(cookie)
            if signed is None or signed[1] <= time.monotonic():
                self._signed_in.pop(cookie, None)
                return None
            return signed[0]

    async def _verify(self, token: str) -> str | None:
        for verify in self.verifiers:
            owner = await verify(token)
            if owner is not None:
                return owner if owner in self.operators else None
        return None

    async def _sign_in(self, request: Request) -> Response:
        if not same_origin(request):
            return HTMLResponse(login_page("sign in from the console's own page"), 403)
        form = await request.form()
        owner = await self._verify(str(form.get("token", "")))
        if owner is None:
            problem = "that token is not accepted, or its owner is not in [gateway] operators"
            return HTMLResponse(login_page(problem), 401, headers=PAGE_HEADERS)
        key = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            for stale in [k for k, (_, until) in self._signed_in.items() if until <= now]:
                del self._signed_in[stale]
            self._signed_in[key] = (owner, now + _SIGNED_IN_S)
        response = RedirectResponse(PREFIX, 303, headers=PAGE_HEADERS)
        response.set_cookie(
            _COOKIE, key, max_age=int(_SIGNED_IN_S), path=PREFIX, httponly=True, samesite="strict"
        )
        return response

    def _overview(self) -> str:
        now = time.monotonic()
        sessions: list[SessionRow] = []
        approvals: list[ApprovalRow] = []
        registry = self.engine.registry
        for record in registry.sessions() if registry is not None else []:
            state = (
                "paused"
                if record.paused is not None
                else "running"
                if record.busy
                else "released"
                if record.released
                else "idle"
            )
            sessions.append(
                SessionRow(
                    record.handle, record.owner, state, now - record.created, now - record.last_used
                )
            )
            pending = self.engine.approvals.pending_for(record.handle)
            if pending is not None:
                approvals.append(
                    ApprovalRow(
                        pending.id,
                        pending.session,
                        pending.owner,
                        f"{pending.call.server}.{pending.call.tool}",
                        pending.reason,
                        now - pending.created,
                    )
                )
        return overview_page(
            sessions,
            approvals,
            self._skills(),
            self.ledger.sessions(),
            self.ledger.definition_tokens,
            self.ledger.points(),
        )

    def _skills(self) -> list[SkillRow]:
        runtime = self.engine.skills
        library = runtime.library if runtime is not None else None
        if library is None:
            return []
        rows = []
        for skill in library.store.list():
            usage = library.usage.of(skill)
            runs = usage.ok + usage.failed
            rows.append(
                SkillRow(
                    skill.key,
                    skill.description,
                    usage.imports,
                    f"{usage.ok}/{runs}" if runs else "-",
                    skill.stale or skill.last_test or "",
                    "shared" if skill.shared else "private",
                )
            )
        return rows

    def _audit(self, request: Request) -> str:
        params = request.query_params
        shown = {k: params.get(k, "") for k in ("session", "tool", "decision", "outcome")}
        decision = shown["decision"] if shown["decision"] in DECISIONS else None
        outcome = shown["outcome"] if shown["outcome"] in OUTCOMES else None
        filters = AuditFilter(
            session=shown["session"] or None,
            tool=shown["tool"] or None,
            decision=decision,
            outcome=outcome,
            limit=200,
        )
        log = self.engine.audit_log
        events = log.query(filters) if log is not None else []
        return audit_page(events, shown)

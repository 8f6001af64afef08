"""The approval page as an ASGI app: GET shows the call, POST records the decision.

The link's secret is the credential (the page is reached from the client's URL elicitation,
without the bearer token); the first browser to open it keeps it by a cookie, and the form
carries a per-link check value (CSRF) that must match, from a same-origin page.
"""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from codemode.errors import ApprovalLinkError
from codemode.gateway.web.links import ApprovalLinks
from codemode.gateway.web.page import approval_page, message_page

__all__ = ["PAGE_HEADERS", "PREFIX", "ApprovalPages", "WebPage", "same_origin", "with_web_pages"]

PREFIX = "/approve/"
_COOKIE = "codemode_approval"
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    # The link's secret is in the URL: it must not leave for another site.
    "Referrer-Policy": "same-origin",
}
_DONE = {
    "allow_call": "Allowed once. The execution resumed; you can close this page.",
    "allow_tool": "Allowed for this session. The execution resumed; you can close this page.",
    "deny": "Denied. The code gets a ToolError; you can close this page.",
}


class ApprovalPages:
    def __init__(self, links: ApprovalLinks) -> None:
        self.links = links

    def handles(self, path: str) -> bool:
        return path.startswith(PREFIX)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        secret = request.url.path[len(PREFIX) :]
        cookie = request.cookies.get(_COOKIE)
        try:
            if request.method == "GET":
                link, browser = self.links.open(secret, cookie)
                response: Response = HTMLResponse(
                    approval_page(link, request.url.path), headers=PAGE_HEADERS
                )
                response.set_cookie(
                    _COOKIE, browser, path=request.url.path, httponly=True, samesite="strict"
                )
                return response
            if request.method == "POST":
                if not same_origin(request):
                    raise ApprovalLinkError(
                        "the decision came from another site",
                        fix="decide on the approval page itself",
                    )
                form = await request.form()
                link = self.links.decide(
                    secret, cookie, str(form.get("csrf", "")), str(form.get("decision", ""))
                )
                decided = str(link.decided)
                return HTMLResponse(message_page("Decided", _DONE[decided]), headers=PAGE_HEADERS)
            return HTMLResponse(
                message_page("Not allowed", "use GET or POST"), 405, headers=PAGE_HEADERS
            )
        except ApprovalLinkError as refused:
            return HTMLResponse(
                message_page("This approval link cannot be used", str(refused)),
                410,
                headers=PAGE_HEADERS,
            )


class WebPage(Protocol):
    def handles(self, path: str) -> bool: ...

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None: ...


def with_web_pages(app: Any, *pages: WebPage) -> Any:
    """``app`` with the pages for people in front: the approval page (its links carry their
    own credential) and the console (which checks the same tokens itself)."""

    async def route(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        if scope.get("type") == "http":
            for page in pages:
                if page.handles(path):
                    await page(scope, receive, send)
                    return
        await app(scope, receive, send)

    return route


def same_origin(request: Request) -> bool:
    """A POST from a page of this gateway. Browsers say where a request comes from in
    Sec-Fetch-Site (trusted first) or Origin; a request with neither is no browser's, so
    not a cross-site forgery (the cookie and the check value still apply)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        return urlsplit(origin).netloc == request.headers.get("host", "")
    return origin is None

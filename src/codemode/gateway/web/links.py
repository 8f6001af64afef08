"""Approval links: single-use, expiring, bound to the owner of the paused call.

A link is a capability: whoever holds its secret may open the page once (the browser that
opens it first keeps it, by a cookie) and decide once. The decision goes to whoever waits for
it (``wait``), which answers the broker as the link's owner: the broker's own checks (owner,
digest, exactly once) still apply.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from codemode.errors import ApprovalLinkError

__all__ = ["ApprovalLink", "ApprovalLinks", "Decision"]

Decision = Literal["allow_call", "allow_tool", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow_call", "allow_tool", "deny")


@dataclass
class ApprovalLink:
    secret: str
    approval: Mapping[str, Any]
    owner: str | None
    session: str | None
    # The arguments with the owner's own values back (never sent to the model or the client).
    revealed: Any
    printed: str
    expires: float
    # For each hidden value: where it came from and whether the flow rules let it go.
    flows: list[str] = field(default_factory=list)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # Set by the first browser that opens the link: only it may load and use the page.
    browser: str | None = None
    decided: Decision | None = None
    decision: asyncio.Future[Decision] | None = None

    @property
    def approval_id(self) -> str:
        return str(self.approval["id"])


class ApprovalLinks:
    """Every open approval link of this gateway. Thread-safe."""

    def __init__(
        self, base_url: str, *, ttl_s: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.ttl_s = ttl_s
        self._clock = clock
        self._links: dict[str, ApprovalLink] = {}
        self._by_approval: dict[str, ApprovalLink] = {}
        self._lock = threading.Lock()

    def mint(
        self,
        approval: Mapping[str, Any],
        *,
        owner: str | None,
        session: str | None,
        revealed: Any,
        printed: str = "",
        flows: list[str] | None = None,
    ) -> ApprovalLink:
        """A new link for ``approval`` (one per approval: asking again gives the same)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_expired()
            known = self._by_approval.get(str(approval["id"]))
            if known is not None and known.decided is None:
                return known
            link = ApprovalLink(
                secrets.token_urlsafe(32),
                approval,
                owner,
                session,
                revealed,
                printed,
                self._clock() + self.ttl_s,
                flows=list(flows or []),
                decision=loop.create_future(),
            )
            self._links[link.secret] = link
            self._by_approval[link.approval_id] = link
        return link

    def by_approval(self, approval_id: str) -> ApprovalLink | None:
        with self._lock:
            return self._by_approval.get(approval_id)

    def url(self, link: ApprovalLink) -> str:
        return f"{self.base_url}/approve/{link.secret}"

    def open(self, secret: str, browser: str | None) -> tuple[ApprovalLink, str]:
        """The link for a page load, and the browser key to keep (a new one on first load)."""
        with self._lock:
            link = self._usable(secret)
            if link.browser is None:
                link.browser = secrets.token_urlsafe(24)
            elif not secrets.compare_digest(link.browser, browser or ""):
                raise ApprovalLinkError(
                    "this approval link was already opened in another browser",
                    fix="open the link in the browser that opened it first, or run the code again",
                )
            return link, link.browser

    def decide(self, secret: str, browser: str | None, csrf: str, decision: str) -> ApprovalLink:
        """Record the person's decision, once: the link cannot be used again."""
        with self._lock:
            link = self._usable(secret)
            if link.browser is None or not secrets.compare_digest(link.browser, browser or ""):
                raise ApprovalLinkError(
                    "this approval was not opened in this browser",
                    fix="load the approval page first, then decide on it",
                )
            if not secrets.compare_digest(link.csrf, csrf):
                raise ApprovalLinkError(
                    "the form's check value does not match this approval page",
                    fix="reload the approval page and decide again",
                )
            if decision not in DECISIONS:
                raise ApprovalLinkError(
                    f"unknown decision {decision[:20]!r}",
                    fix="choose one of: " + ", ".join(DECISIONS),
                )
            link.decided = decision
            future = link.decision
        if future is not None:
            future.get_loop().call_soon_threadsafe(_settle, future, link.decided)
        return link

    async def wait(self, approval_id: str) -> Decision:
        """The decision made on ``approval_id``'s page (deny when the link expires)."""
        with self._lock:
            link = self._by_approval.get(approval_id)
        if link is None or link.decision is None:
            return "deny"
        left = max(0.0, link.expires - self._clock())
        try:
            return await asyncio.wait_for(asyncio.shield(link.decision), left)
        except TimeoutError:
            return "deny"

    def _usable(self, secret: str) -> ApprovalLink:
        link = self._links.get(secret)
        if link is None:
            raise ApprovalLinkError(
                "this approval link is unknown or was already used",
                fix="each link works once: run the code again for a new approval",
            )
        if link.decided is not None:
            raise ApprovalLinkError(
                f"this approval was already decided ({link.decided})",
                fix="each link works once: run the code again for a new approval",
            )
        if self._clock() >= link.expires:
            raise ApprovalLinkError(
                "this approval link has expired",
                fix="run the code again for a new approval",
            )
        return link

    def _forget_expired(self) -> None:
        now = self._clock()
        for secret, link in list(self._links.items()):
            if now >= link.expires + self.ttl_s:
                del self._links[secret]
                self._by_approval.pop(link.approval_id, None)


def _settle(future: asyncio.Future[Decision], decision: Decision | None) -> None:
    if not future.done() and decision is not None:
        future.set_result(decision)

"""``--approve web``: the approval page on a local port. Each call that needs approval prints
its single-use link on stderr and waits for the decision taken there (the terminal prompt
stays the default)."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from codemode.engine import Codemode
    from codemode.gateway.web.links import ApprovalLinks
    from codemode.policy.approval import ApprovalRequest
    from codemode.policy.grants import ApprovalAnswer, Remember

__all__ = ["WebApprover", "web_approver"]


class WebApprover:
    def __init__(self, engine: Codemode, links: ApprovalLinks) -> None:
        self.engine = engine
        self.links = links

    async def __call__(self, approval: ApprovalRequest) -> ApprovalAnswer:
        """The agent's approver (``codemode run --approve web``)."""
        from codemode.policy.grants import ApprovalAnswer

        allow, remember = await self.decide(approval, self._session_of(approval.id))
        return ApprovalAnswer(allow, remember)

    def _session_of(self, approval_id: str) -> str | None:
        registry = self.engine.registry
        for record in registry.sessions() if registry is not None else []:
            pending = self.engine.approvals.pending_for(record.handle)
            if pending is not None and pending.id == approval_id:
                return record.handle
        return None

    async def decide(
        self, approval: ApprovalRequest, session: str | None, printed: str = ""
    ) -> tuple[bool, Remember]:
        """(allow, remember) as decided on the page; an expired link denies."""
        from codemode.gateway.web.reveal import mint_page

        link = mint_page(self.links, self.engine, approval, None, session, printed)
        print(
            f"codemode: {approval.tool} needs approval: open {self.links.url(link)} "
            f"(works once, for {self.links.ttl_s / 60:.0f} min)",
            file=sys.stderr,
            flush=True,
        )
        decision = await self.links.wait(approval.id)
        return decision != "deny", "tool" if decision == "allow_tool" else "call"


@contextlib.asynccontextmanager
async def web_approver(engine: Codemode, host: str = "127.0.0.1") -> AsyncIterator[WebApprover]:
    """Serve the approval page on ``host`` (a free port) while the block runs."""
    import uvicorn

    from codemode.gateway.web.app import ApprovalPages
    from codemode.gateway.web.links import ApprovalLinks
    from codemode.sdk_compat import uvicorn_server

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((host, 0))
    port = listener.getsockname()[1]
    links = ApprovalLinks(f"http://{host}:{port}")
    server = uvicorn_server(uvicorn.Config(ApprovalPages(links), log_level="warning"))
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: server.serve(sockets=[listener]))
        try:
            yield WebApprover(engine, links)
        finally:
            server.should_exit = True
    listener.close()

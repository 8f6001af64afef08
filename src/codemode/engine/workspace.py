"""The files of a session's workspace, read inside its sandbox for the engine's clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from codemode.engine.registry import SessionRegistry, SessionState
from codemode.engine.session import Session
from codemode.engine.threads import WorkerThreads
from codemode.engine.views import CatalogViews
from codemode.errors import SandboxError, SessionError, WorkspaceFileError
from codemode.files import WorkspaceFile, WorkspaceListing, list_workspace, read_workspace_file
from codemode.files.access import READ_LIMIT

__all__ = ["WorkspaceFilesMixin"]

_T = TypeVar("_T")


class WorkspaceFilesMixin:
    """Workspace files for ``Codemode``: the state it uses is the engine's own."""

    registry: SessionRegistry | None
    _threads: WorkerThreads

    async def views(self) -> CatalogViews:
        raise NotImplementedError  # the engine's

    def session_handles(self, owner: str | None, *, idle_only: bool = False) -> list[str]:
        """The open sessions of ``owner`` (``idle_only``: not running code now)."""
        if self.registry is None:
            return []
        return self.registry.handles(owner, idle_only=idle_only)

    def session_states(self, owner: str | None) -> dict[str, SessionState]:
        """Each open session of ``owner`` and what it is doing (``released``: its sandbox was
        given back while idle; the next execution restores it)."""
        if self.registry is None:
            return {}
        return self.registry.states(owner)

    async def list_files(self, session: str, *, owner: str | None = None) -> WorkspaceListing:
        """The files, folders and links in a session's workspace (read inside its sandbox)."""
        views = await self.views()

        def listing(record: Session) -> WorkspaceListing:
            return list_workspace(record.sandbox, modules=views.modules)

        return await self._with_workspace(session, owner, listing)

    async def read_file(
        self, session: str, path: str, *, owner: str | None = None, limit: int = READ_LIMIT
    ) -> WorkspaceFile:
        """One regular file of a session's workspace (at most ``limit`` bytes; links refused)."""
        views = await self.views()

        def read(record: Session) -> WorkspaceFile:
            found = read_workspace_file(record.sandbox, path, limit=limit, modules=views.modules)
            return record.finish_file(found)

        return await self._with_workspace(session, owner, read)

    async def _with_workspace(
        self, session: str, owner: str | None, work: Callable[[Session], _T]
    ) -> _T:
        if self.registry is None:
            raise SandboxError("the engine is not started", fix="call `await engine.start()`")
        record = self.registry.checkout(session, owner)
        try:
            if not record.has_workspace:
                raise WorkspaceFileError(
                    "this session's sandbox has no workspace of its own",
                    fix="run codemode with its isolated sandbox (the default backend)",
                )
            if record.paused is not None:
                raise SessionError(
                    "this session is paused, waiting for an approval",
                    fix="answer the approval first, then read its files",
                )
            return await self._threads.run(lambda: work(record))
        finally:
            self.registry.release(record)

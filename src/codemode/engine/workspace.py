"""The files of a session's workspace, read inside its sandbox for the engine's clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from codemode.checkpoints import Checkpoint, archive_entries, archive_file
from codemode.engine.registry import SessionRegistry
from codemode.engine.session import Session
from codemode.engine.threads import WorkerThreads
from codemode.engine.views import CatalogViews
from codemode.errors import SessionError, WorkspaceFileError
from codemode.files import WorkspaceFile, WorkspaceListing, list_workspace, read_workspace_file
from codemode.files.access import MAX_ENTRIES, READ_LIMIT, WorkspaceEntry, check_path, mime_type

if TYPE_CHECKING:
    from codemode.skills.runtime import SkillsRuntime

__all__ = ["WorkspaceFiles"]

_T = TypeVar("_T")


class WorkspaceFiles:
    """The files of a started engine's sessions: read in their sandbox, or in the checkpoint
    of a released one, on the engine's worker threads."""

    def __init__(
        self,
        registry: SessionRegistry,
        skills: SkillsRuntime | None,
        threads: WorkerThreads,
        views: Callable[[], Awaitable[CatalogViews]],
    ) -> None:
        self.registry = registry
        self.skills = skills
        self._threads = threads
        self.views = views

    async def list_files(self, session: str, *, owner: str | None = None) -> WorkspaceListing:
        """The files, folders and links in a session's workspace (read inside its sandbox)."""
        views = await self.views()

        def listing(record: Session) -> WorkspaceListing:
            saved = self._released_checkpoint(record)
            if saved is not None:  # read from the checkpoint: the session stays released
                entries = [
                    WorkspaceEntry(name, "dir" if folder else "file", size, mime_type(name))
                    for name, folder, size in archive_entries(saved.archive)
                ]
                return WorkspaceListing(entries[:MAX_ENTRIES], len(entries) > MAX_ENTRIES)
            return list_workspace(record.sandbox, modules=views.modules)

        return await self._with_workspace(session, owner, listing)

    async def read_file(
        self, session: str, path: str, *, owner: str | None = None, limit: int = READ_LIMIT
    ) -> WorkspaceFile:
        """One regular file of a session's workspace (at most ``limit`` bytes; links refused)."""
        views = await self.views()

        def read(record: Session) -> WorkspaceFile:
            saved = self._released_checkpoint(record)
            if saved is not None:
                return record.finish_file(_from_checkpoint(saved, path, limit))
            found = read_workspace_file(record.sandbox, path, limit=limit, modules=views.modules)
            return record.finish_file(found)

        return await self._with_workspace(session, owner, read)

    def _released_checkpoint(self, record: Session) -> Checkpoint | None:
        """The checkpoint holding a released session's workspace (None: not released)."""
        if not record.released or self.skills is None:
            return None
        return self.skills.saved(record.handle, record.owner)

    async def _with_workspace(
        self, session: str, owner: str | None, work: Callable[[Session], _T]
    ) -> _T:
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


def _from_checkpoint(saved: Checkpoint, path: str, limit: int) -> WorkspaceFile:
    name = "/".join(check_path(path))
    found = archive_file(saved.archive, name, limit)
    if found is None:
        raise WorkspaceFileError(
            f"{path!r} is not a regular file of the workspace",
            fix="list the session's files (resources/list) and read one of those",
        )
    data, size = found
    return WorkspaceFile(name, mime_type(name), data, size, size > len(data))

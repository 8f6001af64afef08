"""Copy the files an execution made out of its sandbox into a folder on the host (for the CLI).

The files are read inside the sandbox (``Codemode.read_file``), never from the workspace on
the host, and written below ``destination`` only: paths are checked, links never followed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from codemode.errors import CodemodeError
from codemode.files.access import WorkspaceFile, WorkspaceListing, check_path
from codemode.storage.private import new_private_dirs, private_open

if TYPE_CHECKING:
    from codemode.sandbox.result import ExecutionResult

__all__ = ["MAX_SAVED", "WorkspaceReader", "changed_files", "save_files", "save_workspace"]

MAX_SAVED = 50


class WorkspaceReader(Protocol):
    """A session's workspace, read inside its sandbox (``Codemode`` is one)."""

    async def list_files(self, session: str) -> WorkspaceListing: ...

    async def read_file(self, session: str, path: str) -> WorkspaceFile: ...


def changed_files(result: ExecutionResult) -> list[str]:
    """The files an execution created or changed (and the whole-output file, if any)."""
    paths = [*result.files.get("created", []), *result.files.get("modified", [])]
    if result.stdout_file is not None:
        paths.append(result.stdout_file)
    return list(dict.fromkeys(paths))


async def save_files(
    engine: WorkspaceReader, session: str, paths: list[str], destination: Path
) -> dict[str, Path | str]:
    """Each path -> where it was saved, or why not (at most ``MAX_SAVED`` files)."""
    saved: dict[str, Path | str] = {}
    for path in paths[:MAX_SAVED]:
        try:
            parts = check_path(path)
            found = await engine.read_file(session, path)
        except CodemodeError as error:
            saved[path] = error.message
            continue
        target = destination.joinpath(*parts)
        new_private_dirs(target.parent)
        if target.parent.resolve() != destination.resolve().joinpath(*parts[:-1]):
            saved[path] = "its folder is a link on this machine"
            continue
        with private_open(target) as out:
            out.write(found.data)
        saved[path] = target
    return saved


async def save_workspace(
    engine: WorkspaceReader, session: str, destination: Path
) -> dict[str, Path | str]:
    """Every file of the session's workspace, copied out (at most ``MAX_SAVED``)."""
    listing = await engine.list_files(session)
    paths = [entry.path for entry in listing.entries if entry.kind == "file"]
    return await save_files(engine, session, paths, destination)

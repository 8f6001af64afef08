"""List and read a session's workspace files through its sandbox, bounded and validated."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from typing import Any, Literal

from codemode.bridge.host import ModuleProvider, PackageProvider, ToolAccess
from codemode.errors import ToolError, WorkspaceFileError
from codemode.files.programs import (
    enter_dir_program,
    fresh_dir_program,
    list_program,
    read_program,
    spill_program,
)
from codemode.sandbox.provider import SessionSandbox
from codemode.sandbox.reports import Restore
from codemode.sandbox.result import ExecutionResult
from codemode.tools import ToolCall

__all__ = [
    "WORKSPACE_SERVER",
    "WorkspaceEntry",
    "WorkspaceFile",
    "WorkspaceListing",
    "check_path",
    "enter_dir",
    "enter_fresh_dir",
    "list_workspace",
    "mime_type",
    "read_workspace_file",
    "write_output_file",
]

WORKSPACE_SERVER = "_workspace"
MAX_ENTRIES = 2000
MAX_DEPTH = 16
MAX_PATH_CHARS = 512
MAX_PARTS = MAX_DEPTH
READ_LIMIT = 8 * 1024 * 1024
CHUNK_BYTES = 256 * 1024
TIMEOUT_S = 20.0
EntryKind = Literal["file", "dir", "link"]
_KINDS = frozenset({"file", "dir", "link"})


@dataclass(frozen=True)
class WorkspaceEntry:
    path: str  # relative to the workspace, "/"-separated
    kind: EntryKind
    size: int
    mime: str


@dataclass(frozen=True)
class WorkspaceListing:
    entries: list[WorkspaceEntry]
    capped: bool  # the sandbox stopped listing at its cap


@dataclass(frozen=True)
class WorkspaceFile:
    path: str
    mime: str
    data: bytes
    size: int  # of the whole file; ``data`` holds at most the read limit
    truncated: bool


def mime_type(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if guessed is None and path.rsplit("/", 1)[-1].rpartition(".")[2] in ("md", "log", "txt"):
        return "text/plain"
    return guessed or "application/octet-stream"


def check_path(path: str) -> list[str]:
    """The parts of a relative workspace path; refuses absolute, empty, ``.``/``..`` parts."""
    parts = path.split("/")
    if (
        not path
        or len(path) > MAX_PATH_CHARS
        or len(parts) > MAX_PARTS
        or "\0" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise WorkspaceFileError(
            f"not a workspace file path: {path[:80]!r}",
            fix="give a path relative to the workspace, e.g. 'result.md' or 'charts/a.png'",
        )
    return parts


@dataclass
class _Collector:
    """The ``_workspace`` built-in server for one program: takes what the sandbox sends."""

    limit: int = READ_LIMIT
    entries: list[WorkspaceEntry] = field(default_factory=list)
    capped: bool = False
    listed: bool = False
    chunks: list[bytes] = field(default_factory=list)
    received: int = 0
    size: int = 0
    ended: bool = False
    refused: str | None = None
    folder: str | None = None
    outgoing: bytes = b""  # handed to the sandbox in chunks (``output``)

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        args = call.arguments
        if call.tool == "entries" and not self.listed:
            self.listed = True
            self._take_entries(args.get("entries"), args.get("capped"))
        elif call.tool == "chunk" and not self.ended:
            data, size = args.get("data"), args.get("size")
            if not isinstance(data, bytes) or not isinstance(size, int) or size < 0:
                raise ToolError("a chunk needs bytes 'data' and an int 'size'")
            if self.received + len(data) > self.limit:
                raise ToolError("more data than asked for")
            self.chunks.append(data)
            self.received += len(data)
            self.size = size
            self.ended = args.get("last") is True
        elif call.tool == "refused" and self.refused is None:
            self.refused = str(args.get("reason"))[:100]
        elif call.tool == "output":
            data, self.outgoing = self.outgoing[:CHUNK_BYTES], self.outgoing[CHUNK_BYTES:]
            return data
        elif call.tool == "moved" and self.folder is None:
            folder = args.get("folder")
            if isinstance(folder, str):
                self.folder = folder[:MAX_PATH_CHARS]
        else:
            raise ToolError(f"{WORKSPACE_SERVER}.{call.tool} is not expected now")
        return None

    def _take_entries(self, raw: Any, capped: Any) -> None:
        if not isinstance(raw, list):
            raise ToolError("entries must be a list")
        self.capped = capped is True or len(raw) > MAX_ENTRIES
        seen: set[str] = set()
        for item in raw[:MAX_ENTRIES]:
            if not (isinstance(item, list) and len(item) == 3):
                continue
            path, kind, size = item
            if not isinstance(path, str) or kind not in _KINDS or not isinstance(size, int):
                continue
            try:
                check_path(path)
            except WorkspaceFileError:
                continue
            if path in seen or size < 0:
                continue
            seen.add(path)
            mime = mime_type(path) if kind == "file" else ""
            self.entries.append(WorkspaceEntry(path, kind, size, mime))
        self.entries.sort(key=lambda entry: entry.path)


def _run(
    sandbox: SessionSandbox,
    program: str,
    collector: _Collector,
    modules: ModuleProvider | None,
    *,
    fresh: bool = False,
    packages: PackageProvider | None = None,
) -> ExecutionResult:
    # ``packages``: the session's installer, for a restore this execution makes first.
    access = ToolAccess(
        collector, modules, lambda server, _tool: server == WORKSPACE_SERVER, packages=packages
    )
    result = sandbox.execute(program, tools=access, fresh=fresh, timeout_s=TIMEOUT_S)
    if result.status != "ok":
        message = (result.error or {}).get("message") or result.status
        raise WorkspaceFileError(
            f"the sandbox could not go through its workspace: {str(message)[:200]}",
            fix="run the session's code again, or start a new session",
        )
    return result


def list_workspace(
    sandbox: SessionSandbox, *, modules: ModuleProvider | None = None
) -> WorkspaceListing:
    """Every file, folder and link in the workspace (bounded; links are never followed)."""
    collector = _Collector()
    _run(sandbox, list_program(MAX_ENTRIES, MAX_DEPTH), collector, modules)
    if not collector.listed:
        raise WorkspaceFileError(
            "the sandbox did not list its workspace", fix="start a new session"
        )
    return WorkspaceListing(collector.entries, collector.capped)


def read_workspace_file(
    sandbox: SessionSandbox,
    path: str,
    *,
    limit: int = READ_LIMIT,
    modules: ModuleProvider | None = None,
) -> WorkspaceFile:
    """A regular file of the workspace, at most ``limit`` bytes; a link or folder is refused."""
    parts = check_path(path)
    collector = _Collector(limit=limit)
    _run(sandbox, read_program(parts, limit, min(CHUNK_BYTES, limit)), collector, modules)
    if collector.refused is not None or not collector.ended:
        raise WorkspaceFileError(
            f"{path!r} is not a regular file of the workspace "
            f"({collector.refused or 'nothing was read'})",
            fix="list the session's files (resources/list) and read one of those; links are "
            "never followed",
        )
    data = b"".join(collector.chunks)
    return WorkspaceFile(path, mime_type(path), data, collector.size, collector.size > len(data))


def enter_fresh_dir(
    sandbox: SessionSandbox,
    prefix: str = "tasks",
    *,
    modules: ModuleProvider | None = None,
    fresh: bool = False,
    packages: PackageProvider | None = None,
) -> tuple[str, Restore | None]:
    """Make the next ``<prefix>/NNN`` folder and make it the code's working directory
    (``fresh``: in a fresh interpreter, as the execution that follows asked): the folder, and
    the checkpoint the sandbox restored first, if it did."""
    collector = _Collector()
    program = fresh_dir_program(prefix)
    done = _run(sandbox, program, collector, modules, fresh=fresh, packages=packages)
    if collector.folder is None:
        raise WorkspaceFileError("the sandbox did not make a fresh folder", fix="try again")
    return collector.folder, done.restored


def enter_dir(
    sandbox: SessionSandbox,
    folder: str,
    *,
    modules: ModuleProvider | None = None,
    fresh: bool = False,
    packages: PackageProvider | None = None,
) -> Restore | None:
    """Make ``folder`` (a task's, relative to the workspace) the code's working directory
    again (``fresh``: in a fresh interpreter): the checkpoint restored first, if one was."""
    collector = _Collector()
    program = enter_dir_program(folder)
    done = _run(sandbox, program, collector, modules, fresh=fresh, packages=packages)
    if collector.folder is None:
        raise WorkspaceFileError("the sandbox did not enter the task's folder", fix="try again")
    return done.restored


def write_output_file(
    sandbox: SessionSandbox,
    text: str,
    folder: str = "outputs",
    *,
    modules: ModuleProvider | None = None,
) -> str:
    """Write ``text`` to the next ``<folder>/stdout-NNN.txt``; its path in the workspace."""
    collector = _Collector(outgoing=text.encode("utf-8", "replace"))
    _run(sandbox, spill_program(folder), collector, modules)
    if collector.folder is None:
        raise WorkspaceFileError("the sandbox did not write the output file", fix="try again")
    return collector.folder

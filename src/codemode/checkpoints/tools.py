"""Taking and restoring a checkpoint: the ``_checkpoint`` server and the sandbox programs.

The host never reads the workspace. After an execution, a short host-written program runs in
the sandbox, builds a tar of the workspace itself (regular files and folders only, links never
followed) and pickles the variables the code asked to keep (``from state import keep``); it
sends both to the ``_checkpoint`` built-in server, which validates and bounds them before they
are stored. Restoring is the reverse: the sandbox fetches the archive and unpacks it. Pickles
are made and opened only inside the sandbox.
"""

from __future__ import annotations

import io
import keyword
import tarfile
import time
from collections.abc import Sequence
from typing import Any, TypeGuard

from codemode.checkpoints.store import Checkpoint, CheckpointStore
from codemode.errors import StateStoreError, ToolError
from codemode.tools import ToolCall

__all__ = [
    "CHECKPOINT_SERVER",
    "RESTORE_PROGRAM",
    "TAKE_PROGRAM",
    "CheckpointTools",
    "archive_entries",
    "archive_file",
]

CHECKPOINT_SERVER = "_checkpoint"
_MAX_INSTALLS = 50  # recorded per session
_MAX_CWD_CHARS = 1024


class CheckpointTools:
    """The ``_checkpoint`` server of one session: ``keep``, ``put`` and ``fetch``."""

    def __init__(
        self,
        store: CheckpointStore,
        *,
        handle: str,
        owner: str,
        max_bytes: int,
        max_files: int,
        ttl_s: float,
    ) -> None:
        self.store = store
        self.handle = handle
        self.owner = owner
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.ttl_s = ttl_s
        self.kept: set[str] = set()
        # What the last put or fetch did, for the result (set on this thread, read after).
        self.note: str | None = None
        self.fetched: Checkpoint | None = None
        # Why the last fetch could not read the stored checkpoint (a store that failed, or a
        # sealed value that failed its check), for the result.
        self.unreadable: str | None = None
        self.restored_variables: list[str] = []
        # The installs the session made (``note_installed``), in order: a new sandbox (after
        # an idle release, a lost one) installs them again when it restores the checkpoint.
        self.packages: list[tuple[str, ...]] = []
        self.packages_changed = False  # since the last checkpoint saved
        self.restored_packages: list[str] = []

    def reset_restore(self) -> None:
        self.fetched = None
        self.unreadable = None
        self.restored_variables = []
        self.restored_packages = []

    def note_installed(self, requirements: Sequence[str]) -> None:
        """The session's code installed ``requirements`` (the host did, and said so)."""
        names = tuple(requirements)
        if names and names not in self.packages and len(self.packages) < _MAX_INSTALLS:
            self.packages.append(names)
            self.packages_changed = True

    def refresh(self) -> bool:
        """Keep the stored checkpoint for ``ttl_s`` from now (on the host, no sandbox);
        False when there is none."""
        found = self.store.get(self.handle)
        if found is None or found.owner != self.owner:
            return False
        self.store.put(self.handle, found, expires_at=time.time() + self.ttl_s)
        return True

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        args = call.arguments
        if call.tool == "keep":
            names = args.get("names")
            if not isinstance(names, list) or not all(_identifier(n) for n in names):
                raise ToolError("keep() takes variable names, e.g. keep('rows', 'model')")
            if len(self.kept | set(names)) > 100:
                raise ToolError("keep() holds at most 100 variables")
            self.kept |= set(names)
            return sorted(self.kept)
        if call.tool == "put":
            self._put(args)
            return None
        if call.tool == "fetch":
            try:
                found = self.store.get(self.handle)
            except StateStoreError as error:
                self.unreadable = error.message
                raise ToolError("checkpoint: the stored checkpoint could not be read") from None
            if found is None or found.owner != self.owner:
                return {"archive": b"", "variables": {}, "packages": [], "cwd": ""}
            self.fetched = found
            # This session's own installs since (a checkpoint that could not be saved) too.
            self.packages = [
                *found.packages,
                *(n for n in self.packages if n not in found.packages),
            ]
            return {
                "archive": found.archive,
                "variables": found.variables,
                "packages": [list(names) for names in self.packages],
                "cwd": found.cwd,
            }
        if call.tool == "restored":
            names = args.get("variables")
            if isinstance(names, list):
                self.restored_variables = [n for n in names if _identifier(n)][:100]
            installed = args.get("packages")
            if isinstance(installed, list):  # which of the fetched installs were made again
                self.restored_packages = [
                    name
                    for at, names in enumerate(self.packages)
                    if at in installed
                    for name in names
                ]
            return None
        raise ToolError(f"_checkpoint has no operation {call.tool!r}")

    def _put(self, args: dict[str, Any]) -> None:
        problem = args.get("error")
        if isinstance(problem, str):
            self.note = "not saved: " + problem[:200]
            return
        archive, variables = args.get("archive"), args.get("variables")
        files: tuple[str, ...] | None = None
        if archive is None:  # the files are unchanged: the stored archive stays
            stored = self.store.get(self.handle)
            if stored is None or stored.owner != self.owner:
                self.note = "not saved: the checkpoint to keep the files of is gone"
                return
            archive, files = stored.archive, stored.files
        if not isinstance(archive, bytes) or not isinstance(variables, dict):
            raise ToolError("checkpoint: malformed put")
        total = len(archive) + sum(len(v) for v in variables.values() if isinstance(v, bytes))
        if total > self.max_bytes:
            self.note = f"not saved: {total:,} bytes is over the {self.max_bytes:,}-byte limit"
            return
        for name, value in variables.items():
            if not _identifier(name) or name not in self.kept or not isinstance(value, bytes):
                raise ToolError("checkpoint: variables must be the kept names, pickled")
        if files is None:
            files = _members(archive, self.max_files, self.max_bytes)
        installs = tuple(self.packages)
        cwd = args.get("cwd")
        checkpoint = Checkpoint(
            self.owner,
            time.time(),
            archive,
            files,
            dict(variables),
            packages=installs,
            cwd=cwd if _relative_folder(cwd) else "",
        )
        self.store.put(self.handle, checkpoint, expires_at=time.time() + self.ttl_s)
        self.packages_changed = False
        self.note = f"saved {len(files)} file(s), {len(variables)} variable(s)"


def archive_entries(archive: bytes) -> list[tuple[str, bool, int]]:
    """(path, is a folder, size) of each file of a checkpoint's archive (validated when it
    was stored) and of the folders holding them, sorted: a released session's files listed
    without a sandbox."""
    if not archive:
        return []
    entries: dict[str, tuple[bool, int]] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            if member.isfile():
                entries[member.name] = (False, member.size)
                parts = member.name.split("/")
                for depth in range(1, len(parts)):
                    entries.setdefault("/".join(parts[:depth]), (True, 0))
    return [(name, *entries[name]) for name in sorted(entries)]


def archive_file(archive: bytes, path: str, limit: int) -> tuple[bytes, int] | None:
    """(at most ``limit`` bytes, whole size) of one regular file of the archive, or None."""
    if not archive:
        return None
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            if member.name == path and member.isfile():
                data = tar.extractfile(member)
                return (data.read(limit) if data is not None else b""), member.size
    return None


def _relative_folder(path: object) -> TypeGuard[str]:
    """A folder inside the workspace, as the sandbox names it: relative, no ``..``."""
    if not isinstance(path, str) or not 0 < len(path) <= _MAX_CWD_CHARS or "\0" in path:
        return False
    return not path.startswith("/") and ".." not in path.split("/")


def _identifier(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _members(archive: bytes, max_files: int, max_bytes: int) -> tuple[str, ...]:
    """The file names in a tar the sandbox built: only relative regular files and folders."""
    if not archive:
        return ()
    names: list[str] = []
    size = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar:
                parts = member.name.split("/")
                if (
                    member.name.startswith("/")
                    or ".." in parts
                    or not (member.isfile() or member.isdir())
                ):
                    raise ToolError(f"checkpoint: refused archive member {member.name[:100]!r}")
                size += member.size
                if member.isfile():
                    names.append(member.name)
                if len(names) > max_files or size > max_bytes:
                    raise ToolError("checkpoint: archive over its file or size limit")
    except tarfile.TarError:
        raise ToolError("checkpoint: the archive is not a valid tar") from None
    return tuple(sorted(names))


# Run inside the sandbox after an execution. ``{root}``, ``{names}``, ``{limit}`` and
# ``{max_files}`` are filled in by the host (a path constant, identifiers and integers).
TAKE_PROGRAM = """\
def __codemode_checkpoint(root, names, limit, max_files, archive):
    import io, os, pickle, tarfile
    call_tool = __import__("sys").modules["servers._runtime"].call_tool
    buffer, count, total = io.BytesIO(), 0, 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        stack = [""] if archive else []
        while stack:
            rel = stack.pop()
            for entry in sorted(os.scandir(os.path.join(root, rel)), key=lambda e: e.name):
                path = rel + "/" + entry.name if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(path)
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                count += 1
                total += entry.stat(follow_symlinks=False).st_size
                if count > max_files or total > limit:
                    call_tool("_checkpoint", "put", {{"error": "the workspace is over the "
                              "checkpoint limit (%d files, %d bytes)" % (max_files, limit)}})
                    return
                fd = os.open(os.path.join(root, path), os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read(limit + 1)
                info = tarfile.TarInfo(path)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    variables = {{}}
    for name in names:
        if name in globals():
            try:
                variables[name] = pickle.dumps(globals()[name])
            except Exception:
                pass
    cwd = os.path.relpath(os.getcwd(), root)
    cwd = "" if cwd == "." or cwd.startswith("..") else cwd
    call_tool("_checkpoint", "put", {{"archive": buffer.getvalue() if archive else None,
                                     "variables": variables, "cwd": cwd}})
__codemode_checkpoint({root!r}, {names!r}, {limit}, {max_files}, {archive!r})
del __codemode_checkpoint
"""

RESTORE_PROGRAM = """\
def __codemode_restore(root):
    import io, os, pickle, tarfile
    call_tool = __import__("sys").modules["servers._runtime"].call_tool
    got = call_tool("_checkpoint", "fetch", {{}})
    if got["archive"]:
        with tarfile.open(fileobj=io.BytesIO(got["archive"]), mode="r:") as tar:
            for member in tar:
                parts = member.name.split("/")
                if member.name.startswith("/") or ".." in parts:
                    continue
                target = os.path.join(root, member.name)
                if member.isdir():
                    os.makedirs(target, exist_ok=True)
                elif member.isfile():
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                    with os.fdopen(os.open(target, flags, 0o644), "wb") as out:
                        out.write(tar.extractfile(member).read())
    restored = []
    for name, data in got["variables"].items():
        try:
            globals()[name] = pickle.loads(data)
            restored.append(name)
        except Exception:
            pass
    # The working directory the code had (project mode's task folder, a chdir of its own),
    # made again when it held no file (the archive keeps only files).
    if got.get("cwd"):
        folder = os.path.join(root, got["cwd"])
        try:
            os.makedirs(folder, exist_ok=True)
            os.chdir(folder)
        except OSError:
            pass
        else:  # its modules import, as a task's do
            sys_path = __import__("sys").path
            if folder not in sys_path:
                sys_path.insert(1, folder)
    # The session's packages (installed by the host, so through the same checks as before).
    packages = __import__("sys").modules["servers._runtime"].packages
    reinstalled = []
    for at, names in enumerate(got.get("packages") or []):
        try:
            packages.install(names, quiet=True)
            reinstalled.append(at)
        except Exception:
            pass
    call_tool("_checkpoint", "restored", {{"variables": restored, "packages": reinstalled}})
__codemode_restore({root!r})
del __codemode_restore
"""

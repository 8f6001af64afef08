"""Stored data only its owner can read: directories 0700, files 0600.

State (kv values, checkpoints with workspace files, the fix memory), caches and approvals hold
what one user's code and tools produced; on a shared machine another local user must not read
them. The CLI and ``serve`` set a private umask (they own the process); a library must not
change a process-wide umask, so stores and caches create their files with explicit modes
whatever the umask (``private_dir``, ``private_file``, ``private_open``, ``private_write``),
and a store opened with looser modes (written by an older version) is tightened on the spot.
``loose_paths`` is what ``codemode doctor`` reports.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "PRIVATE_UMASK",
    "loose_paths",
    "new_private_dirs",
    "private_dir",
    "private_file",
    "private_open",
    "private_sqlite",
    "private_write",
    "restrict_umask",
]

PRIVATE_UMASK = 0o077
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def restrict_umask() -> int:
    """Every file and directory this process (and its children) creates from now on is the
    owner's only; returns the previous umask."""
    return os.umask(PRIVATE_UMASK)


def _tighten(path: Path, mode: int) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        return  # not ours to change (a symlink, or another user's path given in the config)
    if stat.S_IMODE(info.st_mode) & PRIVATE_UMASK:
        path.chmod(stat.S_IMODE(info.st_mode) & ~PRIVATE_UMASK & mode)


def new_private_dirs(path: Path) -> Path:
    """``path`` as a directory, each folder created on the way 0700 (those that exist are
    left as they are: a folder the user chose keeps its modes)."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another thread
            folder.mkdir(mode=0o700)
    path.mkdir(exist_ok=True)  # a file in its place: FileExistsError, as mkdir says
    return path


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter (created 0700 with every folder on
    the way, tightened if looser)."""
    new_private_dirs(path)
    _tighten(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """``path`` as a file only its owner can read: created empty with 0600 when missing,
    tightened when it exists with looser modes. Its directory is made private too."""
    private_dir(path.parent)
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    os.close(descriptor)
    _tighten(path, 0o600)
    return path


def private_open(path: Path) -> BinaryIO:
    """``path`` opened for writing (truncated), 0600 whatever the umask or its old modes;
    a link in its place is refused (``OSError``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(path, flags, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "wb")


def private_write(path: Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` in one step (a reader never sees half), 0600."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with private_open(partial) as out:
            out.write(data)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def private_sqlite(path: Path) -> Path:
    """A SQLite database file and its journal files (which SQLite creates with the database's
    own modes) private to their owner, before the database is opened."""
    private_file(path)
    for suffix in _SQLITE_SIDE_FILES:
        _tighten(path.with_name(path.name + suffix), 0o600)
    return path


def loose_paths(root: Path, *, limit: int = 20) -> list[tuple[Path, int]]:
    """Paths under ``root`` (itself included) that another user could read or enter: (path,
    mode) for at most ``limit`` of them. Symlinks are not followed."""
    found: list[tuple[Path, int]] = []
    if not root.exists():
        return found
    pending = [root]
    while pending and len(found) < limit:
        path = pending.pop()
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & PRIVATE_UMASK:
            found.append((path, stat.S_IMODE(info.st_mode)))
        if stat.S_ISDIR(info.st_mode):
            try:
                pending += sorted(path.iterdir())
            except OSError:
                continue
    return found

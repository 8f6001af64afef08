"""Rotation and retention of the audit log file, by size and by age.

The log is append-only, so old rows are never deleted from a live file: the whole file is
rotated (renamed ``<name>.rotated-<UTC time>-<pid>``) when it grows past ``max_bytes`` or its
oldest row is older than ``rotate_after_days``, and a new one is started. Rotated files older
than ``retention_days`` (by their last write), and the oldest beyond ``keep_files``, are
deleted. Files moved aside as corrupt are left alone.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from codemode.settings.audit import AuditSettings

__all__ = ["needs_rotation", "prune", "rotate", "rotated_files"]

_DAY_S = 86_400.0
_SIDE_FILES = ("-wal", "-shm")


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of the log at ``path``, oldest first."""
    return sorted(path.parent.glob(f"{path.name}.rotated-*[0-9]"))


def needs_rotation(
    path: Path, connection: sqlite3.Connection, settings: AuditSettings, now: float
) -> bool:
    size = sum(
        side.stat().st_size for side in (path, path.with_name(path.name + "-wal")) if side.exists()
    )
    if size > settings.max_bytes:
        return True
    oldest = connection.execute("SELECT MIN(time) FROM events").fetchone()[0]
    return oldest is not None and now - float(oldest) > settings.rotate_after_days * _DAY_S


def rotate(path: Path, connection: sqlite3.Connection) -> Path | None:
    """Move the log aside (the caller closes ``connection`` after and reconnects)."""
    with contextlib.suppress(sqlite3.Error):
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.rotated-{stamp}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        path.rename(target)
    except FileNotFoundError:  # another process rotated it first
        return None
    for suffix in _SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).rename(target.with_name(target.name + suffix))
    return target


def prune(path: Path, settings: AuditSettings, now: float) -> list[Path]:
    """Delete rotated files past the retention age or the file count; the ones deleted."""
    files = rotated_files(path)
    gone: list[Path] = []
    for index, file in enumerate(files):
        try:
            modified = file.stat().st_mtime
        except FileNotFoundError:
            continue
        too_many = len(files) - index > settings.keep_files
        if too_many or now - modified > settings.retention_days * _DAY_S:
            for item in (file, *(file.with_name(file.name + s) for s in _SIDE_FILES)):
                with contextlib.suppress(FileNotFoundError):
                    item.unlink()
            gone.append(file)
    return gone

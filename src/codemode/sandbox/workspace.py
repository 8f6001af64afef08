"""The workspace as the host sees it: the file list of a result, and the copy that carries it
into a new sandbox for ``fresh=True``.

The guest's word is untrusted, so the host lists the workspace itself, through
``/proc/<guest>/root``, while every process of the sandbox is stopped. Every lookup is relative
to an open directory with ``O_NOFOLLOW``: a link planted by the code is listed (or copied) as a
link and never followed on the host.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field

from codemode.sandbox.layout import WORKSPACE

__all__ = ["CopyReport", "Snapshot", "copy_workspace", "diff", "open_workspace", "scan"]

# path relative to the workspace -> (mtime_ns, size)
Snapshot = dict[str, tuple[int, int]]

MAX_ENTRIES = 5000
MAX_DEPTH = 64
LISTED_PER_KIND = 200
NAME_CHARS = 200
LISTED_CHARS = 8000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SKIPPED_DIRS = frozenset({"__pycache__"})


class _ScanFullError(Exception):
    """The scan reached ``MAX_ENTRIES``."""


def open_workspace(guest_pid: int) -> int:
    """A directory descriptor of a sandbox's workspace (the caller closes it)."""
    return os.open(f"/proc/{guest_pid}/root{WORKSPACE}", _DIR_FLAGS)


def scan(root_fd: int) -> tuple[Snapshot, bool]:
    """Every file and link under the workspace; True when the scan stopped at its caps."""
    found: Snapshot = {}
    capped = [False]
    try:
        _scan(root_fd, "", found, 0, capped)
    except _ScanFullError:
        return found, True
    return found, capped[0]


def _scan(fd: int, prefix: str, found: Snapshot, depth: int, capped: list[bool]) -> None:
    try:
        with os.scandir(fd) as listing:
            entries = list(listing)
    except OSError:
        return
    for entry in entries:
        path = f"{prefix}{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if entry.name in _SKIPPED_DIRS:
                continue
            if depth + 1 >= MAX_DEPTH:
                capped[0] = True  # one open descriptor per level: not deeper than this
                continue
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                _scan(sub, path + "/", found, depth + 1, capped)
            finally:
                os.close(sub)
            continue
        found[path] = (st.st_mtime_ns, st.st_size)
        if len(found) >= MAX_ENTRIES:
            raise _ScanFullError


def _shown(name: str) -> str:
    """A name as valid UTF-8, cut to ``NAME_CHARS``: it is data for the model, nothing else."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def diff(before: Snapshot, after: Snapshot) -> tuple[dict[str, list[str]], int]:
    """(created, modified and deleted names, bounded; how many names were left out)."""
    if before == after:  # most executions write no file
        return {"created": [], "modified": [], "deleted": []}, 0
    kinds = {
        "created": sorted(p for p in after if p not in before),
        "modified": sorted(p for p in after if p in before and after[p] != before[p]),
        "deleted": sorted(p for p in before if p not in after),
    }
    listed: dict[str, list[str]] = {}
    budget = LISTED_CHARS
    left_out = 0
    for kind, names in kinds.items():
        shown: list[str] = []
        for name in names:
            text = _shown(name)
            if len(shown) >= LISTED_PER_KIND or len(text) > budget:
                left_out += 1
                continue
            budget -= len(text)
            shown.append(text)
        listed[kind] = shown
    return listed, left_out


@dataclass
class CopyReport:
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def copy_workspace(source_fd: int, target_fd: int) -> CopyReport:
    """Copy files, directories and links from one workspace into another (empty) one.
    Anything else (fifos, sockets) and anything that does not fit is skipped and named."""
    report = CopyReport()
    _copy(source_fd, target_fd, "", report, 0)
    return report


def _copy(src: int, dst: int, prefix: str, report: CopyReport, depth: int) -> None:
    try:
        with os.scandir(src) as listing:
            entries = list(listing)
    except OSError:
        report.skipped.append(prefix or ".")
        return
    for entry in entries:
        name, path = entry.name, f"{prefix}{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and depth + 1 < MAX_DEPTH:
                _copy_dir(src, dst, name, path, st, report, depth)
            elif stat.S_ISREG(st.st_mode):
                _copy_file(src, dst, name, st, report)
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                os.utime(
                    name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst, follow_symlinks=False
                )
            else:
                report.skipped.append(path)
        except OSError:
            report.skipped.append(path)


def _copy_dir(
    src: int, dst: int, name: str, path: str, st: os.stat_result, report: CopyReport, depth: int
) -> None:
    os.mkdir(name, 0o700, dir_fd=dst)
    sub_src = os.open(name, _DIR_FLAGS, dir_fd=src)
    try:
        sub_dst = os.open(name, _DIR_FLAGS, dir_fd=dst)
        try:
            _copy(sub_src, sub_dst, path + "/", report, depth + 1)
            os.chmod(sub_dst, stat.S_IMODE(st.st_mode))
            os.utime(sub_dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(sub_dst)
    finally:
        os.close(sub_src)


def _copy_file(src: int, dst: int, name: str, st: os.stat_result, report: CopyReport) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    reader = os.open(name, flags, dir_fd=src)
    try:
        if not stat.S_ISREG(os.fstat(reader).st_mode):
            raise OSError("not a regular file")
        create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        writer = os.open(name, create, stat.S_IMODE(st.st_mode), dir_fd=dst)
        try:
            copied = 0
            while True:
                sent = os.sendfile(writer, reader, None, 1 << 24)
                if sent == 0:
                    break
                copied += sent
            os.utime(writer, ns=(st.st_atime_ns, st.st_mtime_ns))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dst)
            raise
        finally:
            os.close(writer)
    finally:
        os.close(reader)
    report.files += 1
    report.bytes += copied

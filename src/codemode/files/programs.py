"""The programs the host runs in a sandbox to list, read and set up workspace files.

Each runs in the session's interpreter as one execution, inside a function it deletes again,
so the code's variables are untouched. Standard library only. Paths are walked one directory
at a time with ``O_NOFOLLOW``: a link is reported as a link and never followed. What they send
is untrusted all the same (the code may have replaced ``os``): the host bounds and checks it.
"""

from __future__ import annotations

__all__ = [
    "enter_dir_program",
    "fresh_dir_program",
    "list_program",
    "read_program",
    "spill_program",
]

_PRELUDE = """\
def __codemode_workspace(*args):
    import os
    import stat
    from servers._runtime import call_tool

    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    root = os.environ.get("HOME") or "/workspace"
"""

_LIST = """\
    max_entries, max_depth = args
    found, capped = [], False
    stack = [(os.open(root, dir_flags), "", 0)]
    while stack and not capped:
        fd, prefix, depth = stack.pop()
        try:
            for name in sorted(os.listdir(fd)):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                path = prefix + name
                if stat.S_ISDIR(st.st_mode):
                    found.append([path, "dir", 0])
                    if name != "__pycache__" and depth + 1 < max_depth:
                        try:
                            sub = os.open(name, dir_flags, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((sub, path + "/", depth + 1))
                elif stat.S_ISLNK(st.st_mode):
                    found.append([path, "link", 0])
                elif stat.S_ISREG(st.st_mode):
                    found.append([path, "file", st.st_size])
                if len(found) >= max_entries:
                    capped = True
                    break
        finally:
            os.close(fd)
    for fd, _prefix, _depth in stack:
        os.close(fd)
    call_tool("_workspace", "entries", {"entries": found, "capped": capped})
"""

_READ = """\
    parts, limit, chunk = args
    fd = os.open(root, dir_flags)
    try:
        for part in parts[:-1]:
            try:
                sub = os.open(part, dir_flags, dir_fd=fd)
            except OSError as error:
                call_tool("_workspace", "refused", {"reason": type(error).__name__})
                return
            os.close(fd)
            fd = sub
        try:
            handle = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
            )
        except OSError as error:
            call_tool("_workspace", "refused", {"reason": type(error).__name__})
            return
    finally:
        os.close(fd)
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode):
            call_tool("_workspace", "refused", {"reason": "not a regular file"})
            return
        sent = 0
        while True:
            data = os.read(handle, min(chunk, limit - sent))
            last = not data or sent + len(data) >= limit
            call_tool(
                "_workspace", "chunk", {"data": data, "size": st.st_size, "last": last}
            )
            sent += len(data)
            if last:
                return
    finally:
        os.close(handle)
"""

# Work in ``folder`` from now on: the working directory, importable, and told to the host.
_WORK_THERE = """\
    os.chdir(folder)
    import sys

    if folder not in sys.path:
        sys.path.insert(1, folder)
    call_tool("_workspace", "moved", {"folder": os.path.relpath(folder, root)})
"""

_FRESH = (
    """\
    (prefix,) = args
    os.makedirs(os.path.join(root, prefix), exist_ok=True)
    number = 1
    while os.path.lexists(os.path.join(root, prefix, f"{number:03d}")):
        number += 1
    folder = os.path.join(root, prefix, f"{number:03d}")
    os.mkdir(folder)
"""
    + _WORK_THERE
)

# The task's folder again in a new interpreter of the session (``fresh=True``).
_ENTER = (
    """\
    (folder,) = args
    folder = os.path.join(root, folder)
    os.makedirs(folder, exist_ok=True)
"""
    + _WORK_THERE
)


_SPILL = """\
    (folder,) = args
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    number = 1
    while True:
        path = os.path.join(root, folder, f"stdout-{number:03d}.txt")
        try:
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            break
        except FileExistsError:
            number += 1
    try:
        while True:
            data = call_tool("_workspace", "output", {})
            if not data:
                break
            os.write(out, data)
    finally:
        os.close(out)
    call_tool("_workspace", "moved", {"folder": os.path.relpath(path, root)})
"""


def _program(body: str, *args: object) -> str:
    call = ", ".join(repr(arg) for arg in args)
    return (
        f"{_PRELUDE}{body}\n\n"
        f"try:\n    __codemode_workspace({call})\nfinally:\n    del __codemode_workspace\n"
    )


def list_program(max_entries: int, max_depth: int) -> str:
    return _program(_LIST, int(max_entries), int(max_depth))


def read_program(parts: list[str], limit: int, chunk: int) -> str:
    """``parts``: a path already checked by the host (no empty, ``.`` or ``..`` part)."""
    return _program(_READ, [str(part) for part in parts], int(limit), int(chunk))


def fresh_dir_program(prefix: str) -> str:
    """Make ``<prefix>/NNN`` (the next free number) and work there from now on."""
    return _program(_FRESH, str(prefix))


def enter_dir_program(folder: str) -> str:
    """Work in ``folder`` (relative to the workspace; made if it is missing) from now on."""
    return _program(_ENTER, str(folder))


def spill_program(folder: str) -> str:
    """Write what the host hands out (``_workspace.output``) to ``<folder>/stdout-NNN.txt``."""
    return _program(_SPILL, str(folder))

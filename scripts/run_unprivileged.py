"""Run a command as an ordinary user, from root: `make test-unprivileged` uses it.

    run_unprivileged.py [--user NAME] [--need PATH]... -- COMMAND [ARG]...

Creates the user when it does not exist, drops every privilege with ``setpriv`` (real and
effective uid and gid, no supplementary groups, no capabilities) and runs COMMAND with a small
environment. Paths the user must reach but cannot (an interpreter installed under /root, say)
are made reachable in a private mount namespace that only COMMAND sees: a directory the user
may not enter is covered with an empty tmpfs into which the needed entries are bound back.
Permissions on the host are never changed. Exits with COMMAND's exit code.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

CLONE_NEWNS = 0x00020000
DEFAULT_USER = "codemode-test"
PASSED_ENV = ("LANG", "LC_ALL", "TERM", "CI", "NO_COLOR", "PYTEST_ADDOPTS", "PYTHONPATH")


def ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/usr/sbin/nologin", name], check=True
        )
        print(f"run_unprivileged: created the user {name}", file=sys.stderr)
        return pwd.getpwnam(name)


def can_enter(path: Path, user: pwd.struct_passwd) -> bool:
    """Can ``user`` traverse ``path`` (owner, group and other bits; no ACLs here)?"""
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        return True
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == user.pw_gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def first_blocked(paths: list[Path], user: pwd.struct_passwd) -> tuple[Path, set[str]] | None:
    """The shallowest directory the user cannot enter on the way to a needed path, and the
    names under it that lead to needed paths."""
    for path in paths:
        for depth in range(1, len(path.parts)):
            directory = Path(*path.parts[:depth])
            if not can_enter(directory, user):
                children = {
                    other.parts[depth]
                    for other in paths
                    if len(other.parts) > depth and Path(*other.parts[:depth]) == directory
                }
                return directory, children
    return None


def run(argv: list[str]) -> None:
    subprocess.run(argv, check=True)


def expose(paths: list[Path], user: pwd.struct_passwd, stage: Path) -> list[str]:
    """In a new private mount namespace, make every path in ``paths`` reachable for ``user``."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    run(["mount", "--make-rprivate", "/"])
    run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", str(stage)])
    covered = []
    for index in range(32):
        found = first_blocked(paths, user)
        if found is None:
            return covered
        directory, children = found
        keep = stage / str(index)
        keep.mkdir()
        run(["mount", "--rbind", str(directory), str(keep)])
        run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(directory)])
        for child in sorted(children):
            target = directory / child
            if (keep / child).is_dir():
                target.mkdir()
            else:
                target.touch()
            run(["mount", "--rbind", str(keep / child), str(target)])
        covered.append(str(directory))
    raise RuntimeError("more than 32 directories to expose: give the test user its own clone")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--user", default=DEFAULT_USER)
    parser.add_argument("--need", action="append", default=[], type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    if os.geteuid() != 0:
        parser.error("run this as root (it creates a user and drops to it)")
    user = ensure_user(args.user)
    needed = sorted({Path(os.path.realpath(p)) for p in args.need})
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "LOGNAME": user.pw_name,
        "PYTHONDONTWRITEBYTECODE": "1",
        **{key: os.environ[key] for key in PASSED_ENV if key in os.environ},
    }
    drop = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}"]
    drop += ["--clear-groups", "--inh-caps=-all", "--", *command]
    # The mounts live in the child's namespace and vanish with it; the parent, still in the
    # host's namespace, then removes the (empty) staging directory. Never delete through it.
    stage = Path(tempfile.mkdtemp(prefix="codemode-unprivileged-"))
    pid = os.fork()
    if pid == 0:
        try:
            covered = expose(needed, user, stage) if first_blocked(needed, user) else []
            if covered:
                print(
                    "run_unprivileged: made reachable for this run only: " + ", ".join(covered),
                    file=sys.stderr,
                )
            os.execvpe(drop[0], drop, env)
        except BaseException as error:  # noqa: BLE001 - report, then leave the child
            print(f"run_unprivileged: {error}", file=sys.stderr)
        os._exit(127)
    _, status = os.waitpid(pid, 0)
    os.rmdir(stage)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

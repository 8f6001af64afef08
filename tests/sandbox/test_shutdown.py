"""Starting and stopping: bwrap's own words in start errors, nothing left behind at close,
and no host path in the sandbox's /proc/self/mountinfo."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import codemode
from codemode.errors import SandboxError
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings

pytestmark = pytest.mark.limits

REPO = Path(__file__).resolve().parents[2]
MISSING = "/nonexistent/codemode-missing-source"


class BrokenBwrap(BwrapBackend):
    """Asks bwrap to bind a path that does not exist: bwrap refuses and says why."""

    def command(self, *args: object, **kwargs: object) -> list[str]:
        command = super().command(*args, **kwargs)  # type: ignore[arg-type]
        return [command[0], "--ro-bind", MISSING, "/nowhere", *command[1:]]


def test_a_start_error_keeps_bwraps_message() -> None:
    """Finding: bwrap's own error ("Creating new namespace failed: ...") was lost, and the
    user read "no message"."""
    with SandboxPool(BrokenBwrap(SandboxSettings(pool_size=0)), size=0) as pool:
        with pytest.raises(SandboxError) as failure:
            pool.spawn()
    assert f"Can't find source path {MISSING}" in str(failure.value)


def _cgroup_dirs(pool: SandboxPool) -> list[Path]:
    dirs: list[Path] = []
    for sandbox in {*pool._ready, *pool._all}:
        cgroup = getattr(sandbox.process.meter, "cgroup", None)
        if cgroup is not None:
            dirs += cgroup.dirs.values()
    return dirs


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_closing_the_pool_stops_every_sandbox_and_removes_its_cgroups(backend) -> None:
    """Finding: each clean shutdown left one set of cgroup directories behind (the pool
    cleared its list of ready sandboxes before walking it)."""
    pool = SandboxPool(backend, size=2).start()
    session = SandboxSession(pool, "in use")
    try:
        assert session.execute("print(1)").stdout == "1\n"
        assert pool.wait_full(60)
        sandboxes = {*pool._ready, *pool._all}
        pids = [sandbox.process.pid for sandbox in sandboxes]
        cgroups = _cgroup_dirs(pool)
        assert len(set(pids)) == 3
        if backend.enforcement.cgroups is not None:
            assert len({path.name for path in cgroups}) == 3
    finally:
        pool.close()
    assert not [pid for pid in pids if _alive(pid)]
    assert not [path for path in cgroups if path.exists()]
    if backend.enforcement.cgroups is not None:
        mine = re.compile(rf"^{os.getpid()}-")
        left = [
            entry
            for parent in backend.enforcement.cgroups.parents.values()
            if parent.is_dir()
            for entry in parent.iterdir()
            if mine.match(entry.name) and entry in cgroups
        ]
        assert left == []


def _host_paths() -> list[str]:
    """Paths of the host the sandbox must not learn: the user's home, the project, the
    virtualenv, the interpreter's install (when not a system one) and codemode itself."""
    paths = {str(Path.home()), str(REPO), sys.prefix, sys.base_prefix}
    paths.add(str(Path(codemode.__file__).resolve().parents[1]))
    real = {os.path.realpath(p) for p in paths}
    return sorted(p for p in paths | real if p not in ("/", "/usr") and not p.startswith("/usr/"))


MOUNTINFO_PROBE = """
import re
paths = {paths!r}
tokens = set(re.split(r"[\\s,:=]+", open("/proc/self/mountinfo").read()))
print(sorted(t for t in tokens for p in paths if (p + "/") in (t + "/")))
"""


def test_mountinfo_shows_no_host_home_or_project_path(isolated_session: SandboxSession) -> None:
    """Finding: /proc/self/mountinfo in the sandbox showed host paths, the user's home too."""
    paths = _host_paths()
    assert paths, "nothing to look for"
    result = isolated_session.execute(MOUNTINFO_PROBE.format(paths=paths))
    assert (result.status, result.stdout) == ("ok", "[]\n"), result.to_dict()
    # The code still imports from the interpreter and the virtualenv it was offered.
    check = isolated_session.execute("import json, msgpack, sys\nprint(sys.version_info[:2])")
    assert check.stdout == f"{tuple(sys.version_info[:2])}\n", check.to_dict()

"""Sandboxes forked from one template: they share the template's pages copy-on-write, and
nothing writable; each is a sandbox of its own (namespaces, mounts, limits, seccomp)."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.errors import SandboxError
from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.demand import FORKED_SANDBOX_BYTES
from codemode.sandbox.isolation import require_isolation
from codemode.sandbox.runner import Sandbox
from codemode.sandbox.template import SandboxTemplate, _opened_for_joining

pytestmark = pytest.mark.limits  # again as an ordinary user by `make test`

_NAMESPACES = ("mnt", "pid", "net", "ipc", "uts", "user", "cgroup")


def _settings(**changes: object) -> SandboxSettings:
    limits = Limits(wall_time_s=10, memory_bytes=512 * 1024 * 1024, workspace_bytes=64 << 20)
    return SandboxSettings(limits=limits, pool_size=0, **changes)  # type: ignore[arg-type]


@pytest.fixture
def backend() -> Iterator[BwrapBackend]:
    backend = BwrapBackend(_settings())
    yield backend
    backend.close()


def _started(backend: BwrapBackend) -> Sandbox:
    sandbox = Sandbox(backend.spawn(), backend.limits)
    sandbox.wait_ready(30)
    require_isolation(sandbox)
    return sandbox


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def _writable_shared_objects(pid: int) -> set[tuple[str, str]]:
    """(device, inode) of every mapping that is both shared and writable."""
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        perms, device, inode = fields[1], fields[3], fields[4]
        if "w" in perms and "s" in perms:
            found.add((device, inode))
    return found


def _rollup(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        values[name] = int(rest.split()[0])
    return values


def test_two_sandboxes_from_one_template_share_no_writable_page(backend: BwrapBackend) -> None:
    first, second = _started(backend), _started(backend)
    try:
        a, b = first.guest_pid, second.guest_pid
        assert a is not None and b is not None and a != b
        # Both forked from the same template process.
        assert first.process.pid_is_guest and second.process.pid_is_guest
        assert _parent(a) == _parent(b)
        template = _parent(a)
        assert backend.template is not None and _parent(template) == backend.template.pid
        # No mapping both shared and writable is the same object in both.
        assert not (_writable_shared_objects(a) & _writable_shared_objects(b))
        # What one writes over a page it got from the template, the other never sees.
        marker = "written-by-the-first-" + os.urandom(8).hex()
        code = "import _codemode_guest.wire as w\nw.__doc__ = {!r}\nprint(w.__doc__[:9])"
        assert first.execute(code.format(marker)).stdout.strip() == marker[:9]
        seen = second.execute("import _codemode_guest.wire as w\nprint(w.__doc__[:200])")
        assert marker not in seen.stdout and "MessagePack" in seen.stdout
        # Each has its own namespaces and its own tmpfs mounts.
        for name in _NAMESPACES:
            ns_a, ns_b = (os.readlink(f"/proc/{p}/ns/{name}") for p in (a, b))
            assert ns_a != ns_b, f"both sandboxes are in one {name} namespace"
            assert ns_a != os.readlink(f"/proc/{template}/ns/{name}")
        for mount in ("/tmp", "/workspace", "/dev/shm"):
            dev_a, dev_b = (os.stat(f"/proc/{p}/root{mount}").st_dev for p in (a, b))
            assert dev_a != dev_b, f"{mount} is one filesystem for both"
        # And the pages they did not write are shared with the template: the point of it.
        rollup = _rollup(a)
        assert rollup["Shared_Clean"] + rollup["Shared_Dirty"] > 2048, rollup
        assert rollup["Pss"] < rollup["Rss"]
    finally:
        first.kill()
        second.kill()


def test_a_ready_forked_sandbox_costs_less_than_the_pool_counts_for_it(
    backend: BwrapBackend,
) -> None:
    """The warm pool counts ``FORKED_SANDBOX_BYTES`` for each ready fork: its private pages
    (USS), and its share of those it has in common with the template (PSS), stay below that."""
    ready = [_started(backend) for _ in range(4)]
    try:
        for sandbox in ready:
            assert sandbox.guest_pid is not None
            rollup = _rollup(sandbox.guest_pid)
            private = (rollup["Private_Clean"] + rollup["Private_Dirty"]) * 1024
            assert private < FORKED_SANDBOX_BYTES, rollup
            assert rollup["Pss"] * 1024 < FORKED_SANDBOX_BYTES, rollup
    finally:
        for sandbox in ready:
            sandbox.kill()


def test_the_compiler_state_is_made_once_in_the_template_for_every_fork(
    backend: BwrapBackend,
) -> None:
    """The first ``compile`` in a process makes the compiler's state (the AST's types among
    it). The template makes it before it freezes its objects and forks: a sandbox finds the
    types among the frozen objects it shares, not among those it made itself (each fork made
    its own, half of a sandbox's start, before)."""
    sandbox = _started(backend)
    try:
        code = "import _ast, gc\nprint(any(o is _ast.Module for o in gc.get_objects()))"
        result = sandbox.execute(code)
        assert result.status == "ok", result
        assert result.stdout.strip() == "False", "the fork made the compiler's state itself"
    finally:
        sandbox.kill()


def test_what_server_modules_import_is_loaded_once_in_the_template(backend: BwrapBackend) -> None:
    """Every generated server module imports ``__future__`` and ``typing``, and code that
    reads results imports ``json``: the template loads them before it freezes its objects, so
    a sandbox's first ``from servers import ...`` finds them shared (each fork made its own,
    6-8 ms and 1.9 MiB of its own memory, before)."""
    sandbox = _started(backend)
    try:
        code = (
            "import gc, sys\n"
            "print('typing' in sys.modules, 'json' in sys.modules, '__future__' in sys.modules)\n"
            "import json, typing\n"
            "made = {id(o) for o in gc.get_objects()}\n"
            "print(id(typing.Generic) in made, id(json.JSONDecoder) in made)\n"
        )
        result = sandbox.execute(code)
        assert result.status == "ok", result
        assert result.stdout.split() == ["True", "True", "True", "False", "False"], result.stdout
    finally:
        sandbox.kill()


def test_a_forked_sandbox_is_sealed_like_one_started_alone(backend: BwrapBackend) -> None:
    sandbox = _started(backend)
    try:
        code = (
            "import os\n"
            "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines())\n"
            "print(status['CapEff'], status['CapBnd'], status['NoNewPrivs'], status['Seccomp'])\n"
            "print(os.getpid(), os.getuid(), os.uname().nodename)\n"
            "print(open('/proc/sys/user/max_user_namespaces').read().strip())\n"
            "try:\n    open('/dev/planted', 'w')\nexcept OSError as e:\n    print('dev', e.errno)\n"
            "try:\n    keys = open('/proc/keys').read()\nexcept OSError:\n    keys = ''\n"
            "print(keys == '', sorted(os.listdir('/proc/self/fd')))\n"
        )
        result = sandbox.execute(code)
        lines = result.stdout.splitlines()
        assert result.exit_code == 0 and len(lines) == 5, result.to_dict()
        assert lines[0].split() == ["0000000000000000", "0000000000000000", "1", "2"]
        assert lines[1].split()[:3] == ["1", "1000", "sandbox"]
        assert lines[2] == "0"
        assert lines[3] == "dev 30"  # read-only: /dev is the template's, shared
        assert lines[4] == "True ['0', '1', '2', '3', '4']"
    finally:
        sandbox.kill()


def test_limits_of_a_forked_sandbox_are_its_own(backend: BwrapBackend) -> None:
    """RLIMIT_NPROC counts per user namespace: each fork has its own, so one sandbox at its
    process limit leaves another free to start processes."""
    first, second = _started(backend), _started(backend)
    try:
        hold = (
            "import os, time\npids = []\n"
            "try:\n    while True:\n        pid = os.fork()\n"
            "        if pid == 0:\n            time.sleep(30)\n            os._exit(0)\n"
            "        pids.append(pid)\nexcept OSError:\n    pass\nprint(len(pids))"
        )
        held = first.execute(hold)
        # As root, RLIMIT_NPROC does not apply and the cgroup's task limit stops the loop: the
        # watchdog may end the sandbox for it before it prints. As anyone else RLIMIT_NPROC,
        # counted in this sandbox's own user namespace, stops it first, and it prints.
        if held.limit != "processes":
            assert int(held.stdout.strip()) >= backend.limits.processes // 2, held.to_dict()
        free = second.execute("import subprocess\nprint(subprocess.run(['true']).returncode)")
        assert free.stdout.strip() == "0", free.to_dict()
    finally:
        first.kill()
        second.kill()


def test_a_template_that_died_is_started_again(backend: BwrapBackend) -> None:
    _started(backend).kill()
    assert backend.template is not None
    old = backend.template.pid
    assert old is not None
    held = os.pidfd_open(old)
    try:
        os.kill(old, 9)
        # Once it has exited (a kill is delivered when the process next runs), the very next
        # sandbox comes from a new template: no fork is sent to the dead one.
        waiter = select.poll()
        waiter.register(held, select.POLLIN)
        assert waiter.poll(10_000), "the template did not exit within 10 s of SIGKILL"
    finally:
        os.close(held)
    sandbox = _started(backend)
    try:
        assert backend.template.pid not in (None, old)
        assert sandbox.execute("print(6 * 7)").stdout.strip() == "42"
    finally:
        sandbox.kill()


def test_a_forked_sandbox_is_a_child_of_the_template_and_the_kernel_reaps_it(
    backend: BwrapBackend,
) -> None:
    """Forked straight into its pid namespace: no process in between. The template ignores
    SIGCHLD, so a sandbox that ends leaves the process table at once, with no request after
    it (a handler in the template ran only when its receive was interrupted)."""
    sandboxes = [_started(backend) for _ in range(3)]
    assert backend.template is not None and backend.template.pid is not None
    guests = [sandbox.guest_pid for sandbox in sandboxes]
    # The template's interpreter is the child of its bubblewrap (``template.pid``).
    parents = {_parent(guest) for guest in guests if guest is not None}
    assert len(parents) == 1 and _parent(parents.pop()) == backend.template.pid
    for sandbox in sandboxes:
        sandbox.kill()
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{guest}").exists() for guest in guests) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = [guest for guest in guests if Path(f"/proc/{guest}").exists()]
    assert not left, f"still in the process table 5 s after their kill: {left}"


def test_a_cgroup_the_gateway_cannot_open_is_a_clear_error(tmp_path: Path) -> None:
    """The fork joins its cgroups through files the host opened: one that cannot be opened
    stops the start with the path and a fix, and the ones opened before it are closed."""
    opened = tmp_path / "cgroup.procs"
    opened.write_text("")
    before = sorted(os.listdir("/proc/self/fd"))
    missing = tmp_path / "gone" / "cgroup.procs"
    with (
        contextlib.ExitStack() as closer,
        pytest.raises(SandboxError, match=f"could not open the sandbox's cgroup {missing}") as got,
    ):
        _opened_for_joining([str(opened), str(missing)], closer)
    assert "may write to its cgroups" in str(got.value.fix)
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_closing_the_backend_ends_its_template_and_sandboxes(backend: BwrapBackend) -> None:
    sandbox = _started(backend)
    assert backend.template is not None
    template, guest = backend.template.pid, sandbox.guest_pid
    assert template is not None and guest is not None
    backend.close()
    sandbox.process.wait_exit(5)
    assert not sandbox.process.alive()
    assert not Path(f"/proc/{template}").exists() or _zombie_or_gone(template)
    sandbox.kill()


def _zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except OSError:
        return True


def test_a_template_that_cannot_start_falls_back_to_one_bubblewrap_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = BwrapBackend(_settings())

    def broken(control_fd: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["false"], stderr=subprocess.PIPE)

    backend.template = SandboxTemplate(broken, start_timeout_s=5)
    sandbox = _started(backend)
    try:
        assert not sandbox.process.pid_is_guest
        assert backend.template is None
        assert "each sandbox starts in a bubblewrap of its own" in caplog.text
        assert sandbox.execute("print(1)").stdout.strip() == "1"
    finally:
        sandbox.kill()


def test_template_off_starts_one_bubblewrap_each() -> None:
    backend = BwrapBackend(_settings(template=False))
    assert backend.template is None
    sandbox = _started(backend)
    try:
        assert not sandbox.process.pid_is_guest
    finally:
        sandbox.kill()


def test_a_pool_of_forked_sandboxes_serves_sessions(backend: BwrapBackend) -> None:
    with SandboxPool(backend, size=2) as pool:
        sessions = [SandboxSession(pool, f"s{i}") for i in range(3)]
        try:
            outs = [s.execute("import os\nprint(os.getpid())").stdout.strip() for s in sessions]
            assert outs == ["1", "1", "1"]
            guests = {s.sandbox.guest_pid for s in sessions if s.sandbox is not None}
            assert len(guests) == 3
        finally:
            for session in sessions:
                session.close()


def test_a_template_rests_only_once_none_of_its_sandboxes_runs(backend: BwrapBackend) -> None:
    """An idle gateway gives the template's memory back; a sandbox forked from it dies with
    it, so it never rests while one runs."""
    first = _started(backend)
    template = backend.template
    assert template is not None and template.pid is not None
    old = template.pid
    assert not template.rest(), "a sandbox it forked still runs"
    assert template.pid == old and first.execute("print(1)").stdout == "1\n"
    first.kill()
    assert template.rest()
    assert template.pid is None
    with pytest.raises(ProcessLookupError):  # reaped: the template and its namespace are gone
        for _ in range(500):
            os.kill(old, 0)
            time.sleep(0.01)
    again = _started(backend)  # the next start launches a new template
    try:
        assert template.pid not in (None, old)
        assert again.execute("print(6 * 7)").stdout.strip() == "42"
    finally:
        again.kill()


@pytest.mark.parametrize("failing", ["bridge", "stderr pipe", "report socket"])
def test_a_fork_that_cannot_make_its_descriptors_is_a_clear_error_and_leaks_none(
    backend: BwrapBackend, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A gateway out of descriptors fails at whichever end it makes next: the start stops with
    a fix, every end made before is closed (the fork's and the host's), and the next start,
    with descriptors to spare again, works."""
    import socket

    _started(backend).kill()  # the template runs
    template = backend.template
    assert template is not None
    real_pipe, real_socketpair = os.pipe, socket.socketpair
    made = {"pipe": 0, "socketpair": 0}

    def exhausted() -> OSError:
        return OSError(24, "Too many open files")

    def pipe() -> tuple[int, int]:
        made["pipe"] += 1
        if failing == "stderr pipe" and made["pipe"] == 2:
            raise exhausted()
        return real_pipe()

    def socketpair(*args: object, **kwargs: object) -> object:
        made["socketpair"] += 1
        if (failing == "bridge" and made["socketpair"] == 1) or (
            failing == "report socket" and made["socketpair"] == 2
        ):
            raise exhausted()
        return real_socketpair(*args, **kwargs)  # type: ignore[arg-type]

    held = Path(os.devnull)
    before = sorted(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "pipe", pipe)
    monkeypatch.setattr(socket, "socketpair", socketpair)
    with pytest.raises(SandboxError, match="could not make the new sandbox's pipes") as got:
        template.fork([str(held)], timeout_s=10)
    monkeypatch.undo()
    assert "ulimit -n" in str(got.value.fix)
    assert sum(made.values()) >= 1
    assert sorted(os.listdir("/proc/self/fd")) == before, "an end made before the failure"
    sandbox = _started(backend)
    try:
        assert sandbox.execute("print(6 * 7)").stdout.strip() == "42"
    finally:
        sandbox.kill()


def test_a_request_whose_descriptors_did_not_all_fit_is_refused_and_closed() -> None:
    """More descriptors than a request holds: the kernel drops the rest (a cgroup to join
    among them, perhaps), so the template refuses the request, closing those it got, rather
    than fork a sandbox outside one of its cgroups."""
    import socket

    from codemode.sandbox.guest import template as guest_template

    host, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with host, template_end, open(os.devnull) as null:
        too_many = guest_template._REQUEST_FDS + guest_template._MAX_JOINS + 1
        before = sorted(os.listdir("/proc/self/fd"))
        socket.send_fds(host, [b"fork"], [null.fileno()] * too_many)
        assert guest_template._receive(template_end) == []
        assert sorted(os.listdir("/proc/self/fd")) == before, "a received descriptor stayed open"
        socket.send_fds(host, [b"fork"], [null.fileno()] * guest_template._REQUEST_FDS)
        fitting = guest_template._receive(template_end)
        assert len(fitting) == guest_template._REQUEST_FDS
        for fd in fitting:
            os.close(fd)

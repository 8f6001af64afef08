"""Fixtures for sandbox tests. Hostile code only ever runs in a verified-isolated sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.egress import NetworkSettings
from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation

# The project's sample attacks, kept in the repo.
HOSTILE_DIR = Path(__file__).parent / "hostile"


def _process_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, stat, comm) for every process on the host."""
    out = subprocess.run(
        ["ps", "-eo", "pid,ppid,stat,comm"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[1:]
    table = {}
    for line in out:
        row = line.split(None, 3)
        if len(row) == 4:
            table[int(row[0])] = (int(row[1]), row[2], row[3])
    return table


def _descendants(root: int, table: dict[int, tuple[int, str, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, []))
    return found


def sandbox_processes() -> set[int]:
    """PIDs of every bwrap process this test process started, and all their descendants.

    Scoped to this process: other people's sandboxes on a shared machine are not ours.
    """
    table = _process_table()
    mine = _descendants(os.getpid(), table)
    bwraps = {pid for pid in mine if table[pid][2] == "bwrap"}
    found = set(bwraps)
    for pid in bwraps:
        found |= _descendants(pid, table)
    return found - template_processes(bwraps, table)


def template_processes(bwraps: set[int], table: dict[int, tuple[int, str, str]]) -> set[int]:
    """A sandbox template (its bwrap and the interpreter in it) is no sandbox: it lives as
    long as its backend. The sandboxes it forked are its children, and still counted."""
    templates: set[int] = set()
    for pid in bwraps:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"_codemode_guest.template" in command:
            templates.add(pid)
            templates |= {child for child, row in table.items() if row[0] == pid}
    return templates


def zombies() -> list[str]:
    """Zombies among this process's descendants (its sandboxes' included).

    A sandbox's processes live in its pid namespace, so an orphan is reparented to the
    sandbox's pid 1, never to the host's init: every zombie a sandbox can leave is ours.
    Other people's zombies on a shared machine are not counted.
    """
    table = _process_table()
    mine = _descendants(os.getpid(), table)
    return [
        f"{pid} {table[pid][1]} {table[pid][2]}"
        for pid in sorted(mine)
        if table[pid][1].startswith("Z")
    ]


# With CODEMODE_TEST_EGRESS=1 the whole suite runs with the egress proxy on (a socket in every
# sandbox, proxy variables set); the listed destination is a port nothing listens on.
EGRESS_SWITCH = "CODEMODE_TEST_EGRESS"


@pytest.fixture(scope="session")
def hostile_settings() -> SandboxSettings:
    network = NetworkSettings()
    if os.environ.get(EGRESS_SWITCH) == "1":
        network = NetworkSettings(allow=["127.0.0.1:9"], allow_private=["127.0.0.1/32"])
    return SandboxSettings(
        limits=Limits(wall_time_s=6, memory_bytes=512 * 1024 * 1024, workspace_bytes=64 << 20),
        network=network,
        pool_size=1,
    )


@pytest.fixture(scope="session")
def backend(hostile_settings: SandboxSettings) -> BwrapBackend:
    return BwrapBackend(hostile_settings)


@pytest.fixture(scope="session")
def pool(backend: BwrapBackend) -> Iterator[SandboxPool]:
    with SandboxPool(backend, size=1) as pool:
        yield pool


@pytest.fixture
def session(pool: SandboxPool) -> Iterator[SandboxSession]:
    session = SandboxSession(pool, "test")
    yield session
    session.close()


@pytest.fixture
def isolated_session(pool: SandboxPool) -> Iterator[SandboxSession]:
    """A session whose sandbox has proved, from inside, that it is isolated."""
    session = SandboxSession(pool, "hostile")
    started = session.execute("pass")
    assert session.sandbox is not None, f"the sandbox died running `pass`: {started.to_dict()}"
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    yield session
    session.close()
    _assert_host_clean(pool)


def idle_pool_pids(pool: SandboxPool) -> set[int]:
    """Processes of the pool's warm, unused sandboxes (allowed to exist)."""
    pids: set[int] = set()
    for sandbox in list(pool._ready):
        pending = [sandbox.process.pid]
        while pending:
            pid = pending.pop()
            pids.add(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            pending.extend(int(c) for c in children)
    return pids


def host_markers_absent(*paths: str) -> bool:
    return not any(os.path.lexists(p) for p in paths)


# --- Fixtures for the hostile-code suite (tests/sandbox/test_hostile_*.py) --------------------


def _verified(pool: SandboxPool, name: str) -> SandboxSession:
    session = SandboxSession(pool, name)
    started = session.execute("pass")
    assert session.sandbox is not None, f"the sandbox died running `pass`: {started.to_dict()}"
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    return session


#: A killed sandbox's last process may take a moment to leave the process table on a loaded
#: machine (a forked guest is its template's child, which the kernel reaps as it ends): what
#: is still there this long after the session closed was left behind.
LEFTOVER_GRACE_S = 10.0


def _leftovers(pools: tuple[SandboxPool, ...]) -> tuple[set[int], list[str]]:
    idle: set[int] = set()
    for pool in pools:
        idle |= idle_pool_pids(pool)
    return sandbox_processes() - idle, zombies()


def _described(pids: set[int]) -> str:
    table = _process_table()
    rows = [
        f"{pid} (parent {table[pid][0]}, {table[pid][1]}, {table[pid][2]})"
        for pid in pids
        if pid in table
    ]
    return ", ".join(rows) or f"{sorted(pids)} (gone since)"


def _assert_host_clean(*pools: SandboxPool) -> None:
    for pool in pools:
        pool.wait_full(30)  # a refill in flight is not a leftover
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    leftover, dead = _leftovers(pools)
    while (leftover or dead) and time.monotonic() < deadline:
        time.sleep(0.05)
        leftover, dead = _leftovers(pools)
    assert not leftover, f"processes left behind: {_described(leftover)}"
    assert not dead, f"zombies left behind: {dead}"


@pytest.fixture
def second_isolated_session(
    isolated_session: SandboxSession, pool: SandboxPool
) -> Iterator[SandboxSession]:
    """Another verified session from the same pool; closed before ``isolated_session``'s checks."""
    session = _verified(pool, "hostile-2")
    yield session
    session.close()


CANARY_VARIABLE = "CODEMODE_CANARY_SECRET"


@pytest.fixture
def canary_secret() -> Iterator[str]:
    """A secret put in this process's environment before any sandbox of ``canary_session``."""
    import uuid

    secret = f"canary-{uuid.uuid4().hex}"
    previous = os.environ.get(CANARY_VARIABLE)
    os.environ[CANARY_VARIABLE] = secret
    yield secret
    if previous is None:
        os.environ.pop(CANARY_VARIABLE, None)
    else:
        os.environ[CANARY_VARIABLE] = previous


@pytest.fixture
def canary_session(
    canary_secret: str, backend: BwrapBackend, pool: SandboxPool
) -> Iterator[SandboxSession]:
    """A verified session from a dedicated pool started after the canary was set."""
    with SandboxPool(backend, size=1) as own_pool:
        session = _verified(own_pool, "canary")
        yield session
        session.close()
    _assert_host_clean(pool)


LOW_MEMORY_BYTES = 192 << 20


@pytest.fixture
def low_memory_session(backend: BwrapBackend, pool: SandboxPool) -> Iterator[SandboxSession]:
    """A verified session from a dedicated pool whose memory limit is ``LOW_MEMORY_BYTES``."""
    settings = backend.settings.model_copy(
        update={"limits": backend.limits.model_copy(update={"memory_bytes": LOW_MEMORY_BYTES})}
    )
    with SandboxPool(BwrapBackend(settings), size=1) as own_pool:
        session = _verified(own_pool, "low-memory")
        yield session
        session.close()
    _assert_host_clean(pool)


class HostChecks:
    """Host-side checks the hostile tests share (they never run payload code on the host)."""

    @staticmethod
    def pause(seconds: float) -> None:
        """Let time pass on the host (a bounded wait on a pipe nobody writes to)."""
        import select

        read_end, write_end = os.pipe()
        try:
            select.select([read_end], [], [], seconds)
        finally:
            os.close(read_end)
            os.close(write_end)

    @staticmethod
    def next_execution_works(session: SandboxSession) -> None:
        result = session.execute("print('ok')", timeout_s=10)
        assert (result.status, result.stdout) == ("ok", "ok\n"), result.to_dict()

    @staticmethod
    def markers_absent(*paths: str) -> bool:
        return host_markers_absent(*paths)

    @staticmethod
    def extra_sandbox_processes(session: SandboxSession) -> list[str]:
        """Processes in the session's live sandbox besides bwrap and the guest (its pid 1)."""
        sandbox = session.sandbox
        assert sandbox is not None and not sandbox.dead, "the sandbox is gone"
        table = _process_table()
        outer = sandbox.process.pid
        extra = []
        for pid in sorted(_descendants(outer, table)):
            ppid, stat, comm = table[pid]
            if ppid == outer and pid == sandbox.guest_pid:
                continue  # the guest interpreter (pid 1 of its namespace)
            extra.append(f"{pid} {stat} {comm}")
        return extra


@pytest.fixture
def host() -> type[HostChecks]:
    return HostChecks


@pytest.fixture
def bridge() -> Iterator[tuple[socket.socket, socket.socket]]:
    """Two ends of a bridge-like socket pair (host, guest), for helper processes that wait
    on it the way the guest waits."""
    host, guest = socket.socketpair()
    yield host, guest
    host.close()
    guest.close()

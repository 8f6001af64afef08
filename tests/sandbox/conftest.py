"""Fixtures for sandbox tests. Hostile code only ever runs in a verified-isolated sandbox."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation

# A copy of ../shared/hostile (the project's sample attacks), kept in the repo.
HOSTILE_DIR = Path(__file__).parent / "hostile"


def sandbox_processes() -> set[int]:
    """PIDs of every bwrap process (and their descendants) on the host."""
    out = subprocess.run(
        ["ps", "-eo", "pid,ppid,stat,comm"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[1:]
    rows = [line.split(None, 3) for line in out]
    bwraps = {int(r[0]) for r in rows if len(r) == 4 and r[3] == "bwrap"}
    children = {int(r[0]) for r in rows if len(r) == 4 and int(r[1]) in bwraps}
    return bwraps | children


def zombies() -> list[str]:
    out = subprocess.run(
        ["ps", "-eo", "pid,stat,comm"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[1:]
    return [line for line in out if line.split()[1].startswith("Z")]


@pytest.fixture(scope="session")
def hostile_settings() -> SandboxSettings:
    return SandboxSettings(
        limits=Limits(wall_time_s=6, memory_bytes=512 * 1024 * 1024, workspace_bytes=64 << 20),
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
    session.execute("pass")
    assert session.sandbox is not None
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    yield session
    session.close()
    pool.wait_full(30)  # a refill in flight is not a leftover
    leftover = sandbox_processes() - idle_pool_pids(pool)
    assert not leftover, f"processes left behind: {leftover}"
    assert not zombies(), f"zombies left behind: {zombies()}"


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

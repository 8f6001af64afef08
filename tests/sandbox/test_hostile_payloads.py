"""Every sample attack in tests/sandbox/hostile/, judged exactly.

Each test runs the payload in a verified-isolated sandbox (``isolated_session``), asserts the
precise outcome (RESULT line, status and limit), then that the host is healthy: no process or
zombie left (fixture), no file outside the sandbox, and the next execution works.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

HOSTILE_DIR = Path(__file__).parent / "hostile"
TIMEOUT_S = 2.0


def payload(name: str) -> str:
    return (HOSTILE_DIR / f"{name}.py").read_text()


def test_every_payload_is_covered() -> None:
    covered = {
        "cpu_loop", "disk_fill", "fork_bomb", "huge_stdout", "long_c_call",
        "memory_bomb", "network_egress", "read_host_files", "write_outside",
    }  # fmt: skip
    here = {p.stem for p in HOSTILE_DIR.glob("*.py")}
    # Both ways: a payload without a test, or a test whose payload is gone, fails here.
    assert here == covered, f"untested: {here - covered}; missing: {covered - here}"


def test_cpu_loop_times_out(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("cpu_loop"), timeout_s=TIMEOUT_S)
    assert (result.status, result.limit) == ("timeout", "wall_time")
    assert result.sandbox_reset is True
    assert TIMEOUT_S * 1000 <= result.duration_ms < TIMEOUT_S * 1000 + 1000
    host.next_execution_works(isolated_session)


def test_disk_fill_stops_at_the_workspace_quota(isolated_session: SandboxSession, host) -> None:
    before = os.statvfs("/tmp")
    result = isolated_session.execute(payload("disk_fill"), timeout_s=10)
    assert result.status == "ok", result.to_dict()
    assert result.stdout.startswith("RESULT: BLOCKED [Errno 28] No space left on device")
    assert result.files["created"] == ["fill.bin"]
    assert result.workspace_bytes <= 64 << 20
    after = os.statvfs("/tmp")
    # The 64 MiB workspace is a tmpfs in memory: the host disk did not take the fill.
    assert (before.f_bavail - after.f_bavail) * after.f_frsize < 32 << 20
    host.next_execution_works(isolated_session)
    # The session survived, so its files did too; the quota is still enforced.
    again = isolated_session.execute("import os; print(os.path.getsize('fill.bin') <= 64 << 20)")
    assert again.stdout == "True\n"


def test_fork_bomb_hits_the_process_limit(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("fork_bomb"), timeout_s=5)
    assert (result.status, result.limit) == ("limit", "processes"), result.to_dict()
    assert result.sandbox_reset is True
    assert result.duration_ms < 4000
    host.next_execution_works(isolated_session)


def test_huge_stdout_is_capped_and_reported(isolated_session: SandboxSession, host) -> None:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = isolated_session.execute(payload("huge_stdout"), timeout_s=20)
    rss_growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert result.status == "ok", result.to_dict()
    assert result.truncated["stdout_total_bytes"] == 200 << 20
    assert result.truncated["stdout_bytes"] > (200 << 20) - 2000
    assert "bytes omitted" in result.stdout
    assert len(result.stdout) < 1200
    assert result.stdout.rstrip().endswith("x" * 900)
    # The host kept ~1 MiB of 200 MiB: its peak memory must not have grown by the stream.
    assert rss_growth_kib < 48 * 1024, f"host peak RSS grew by {rss_growth_kib} KiB"
    host.next_execution_works(isolated_session)


def test_long_c_call_is_killed_on_time(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("long_c_call"), timeout_s=TIMEOUT_S)
    assert (result.status, result.limit) == ("timeout", "wall_time")
    assert TIMEOUT_S * 1000 <= result.duration_ms < TIMEOUT_S * 1000 + 700, result.duration_ms
    assert result.stdout == ""
    host.next_execution_works(isolated_session)


def test_memory_bomb_hits_the_memory_limit(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("memory_bomb"), timeout_s=10)
    assert (result.status, result.limit) == ("limit", "memory"), result.to_dict()
    assert result.sandbox_reset is True
    host.next_execution_works(isolated_session)


def test_network_egress_is_blocked(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("network_egress"), timeout_s=10)
    assert result.status == "ok"
    assert result.stdout == "RESULT: BLOCKED []\n"
    host.next_execution_works(isolated_session)


def test_host_files_cannot_be_read(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(payload("read_host_files"), timeout_s=10)
    assert result.status == "ok"
    assert result.stdout == "RESULT: BLOCKED [] []\n"
    host.next_execution_works(isolated_session)


WRITE_OUTSIDE_MARKERS = (
    "/tmp/codemode-escape-marker",
    "/dev/shm/codemode-escape-marker",
    "/var/tmp/codemode-escape-marker",
    "/codemode-escape-marker",
    os.path.expanduser("~/codemode-escape-marker"),
)


def test_write_outside_leaves_nothing_on_the_host(isolated_session: SandboxSession, host) -> None:
    assert host.markers_absent(*WRITE_OUTSIDE_MARKERS), "a marker exists before the test"
    result = isolated_session.execute(payload("write_outside"), timeout_s=10)
    assert result.status == "ok"
    # Inside, /tmp and /dev/shm are private tmpfs and ~ is the workspace: those writes succeed
    # there. The root, /var/tmp are read-only.
    assert result.stdout == (
        "RESULT: ESCAPED? ['/tmp/codemode-escape-marker', '/dev/shm/codemode-escape-marker', "
        "'/workspace/codemode-escape-marker']\n"
    )
    assert result.files["created"] == ["codemode-escape-marker"]
    assert host.markers_absent(*WRITE_OUTSIDE_MARKERS)
    host.next_execution_works(isolated_session)

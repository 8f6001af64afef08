"""A stdio gateway ends on SIGTERM within 5 s, whatever its stdin does.

Finding: a stdio gateway given SIGTERM while its client kept stdin open never exited (the MCP
SDK reads stdin in a worker thread, and cancelling waited for the next line).
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.gateway.conftest import serve_argv

READY = b"tools ready"


def _wait_for(process: subprocess.Popen[bytes], needle: bytes, timeout_s: float) -> bytes:
    """stderr up to ``needle`` (bounded), failing with what was printed."""
    assert process.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {needle!r} within {timeout_s} s:\n{seen.decode()}"
        ready, _, _ = select.select([process.stderr], [], [], remaining)
        if ready:
            chunk = process.stderr.read1(4096)  # type: ignore[attr-defined]
            assert chunk, f"the gateway exited early:\n{seen.decode()}"
            seen += chunk
    return seen


def _wait_until_it_catches_sigterm(pid: int, timeout_s: float) -> None:
    """Its handler is installed just after it prints that it is ready: wait for it (bounded)."""
    bit = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) & bit:
                return
        select.select([], [], [], 0.01)
    raise AssertionError(f"the gateway did not handle SIGTERM within {timeout_s} s")


def _start(tmp_path: Path) -> subprocess.Popen[bytes]:
    config = tmp_path / "codemode.toml"
    config.write_text("[sandbox]\npool_size = 0\n")
    return subprocess.Popen(
        serve_argv(config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop_within(process: subprocess.Popen[bytes], seconds: float) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        raise AssertionError(f"the gateway did not exit within {seconds} s of SIGTERM") from None


def test_sigterm_ends_a_stdio_gateway_whose_stdin_stays_open(tmp_path: Path) -> None:
    process = _start(tmp_path)
    try:
        _wait_for(process, READY, 60)
        _wait_until_it_catches_sigterm(process.pid, 30)
        assert _stop_within(process, 5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_sigterm_ends_it_in_the_middle_of_a_message(tmp_path: Path) -> None:
    """Half a JSON-RPC line on stdin, then SIGTERM: no wait for the rest of the line."""
    process = _start(tmp_path)
    assert process.stdin is not None and process.stdout is not None
    try:
        _wait_for(process, READY, 60)
        _wait_until_it_catches_sigterm(process.pid, 30)
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        line = json.dumps(request).encode()
        process.stdin.write(line[: len(line) // 2])
        process.stdin.flush()
        assert _stop_within(process, 5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()

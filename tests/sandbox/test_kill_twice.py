"""Two threads killing the same sandbox at once close each of its descriptors once: a number
closed twice may by then belong to another sandbox (its pidfd, its bridge)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import pytest

from codemode.sandbox import Limits, SandboxSettings
from codemode.sandbox import process as process_module
from codemode.sandbox.backends import make_backend


class _SlowClose:
    """``os`` for process.py, whose ``close`` waits (briefly) for a second close to arrive,
    so that two kills overlap where the old code read the same descriptors twice."""

    def __init__(self) -> None:
        self.closed: Counter[int] = Counter()
        self._two = threading.Barrier(2)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def close(self, fd: int) -> None:
        self.closed[fd] += 1
        try:
            self._two.wait(timeout=0.5)
        except threading.BrokenBarrierError:
            pass
        os.close(fd)


def test_two_kills_at_once_close_each_descriptor_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Honest code only (nothing runs in it): no isolation needed to count closes.
    settings = SandboxSettings(limits=Limits(wall_time_s=10), unsafe_no_isolation=True)
    process = make_backend(settings).spawn()
    watched = (process.stdout_fd, process.stderr_fd)
    slow = _SlowClose()
    monkeypatch.setattr(process_module, "os", slow)
    errors: list[BaseException] = []

    def kill() -> None:
        try:
            process.kill()
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=kill) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert all(slow.closed[fd] == 1 for fd in watched), slow.closed
    assert process.stdout_fd == process.stderr_fd == -1

"""The real ``codemode run`` in a subprocess against a model server that never answers: progress
on stderr while it waits, and SIGTERM/SIGINT end it with exit 130 and a whole ``--json`` record."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def silent_model_url() -> Iterator[str]:
    """An HTTP server that takes requests and never answers them (a model thinking forever)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    listener.close()
    for connection in held:
        connection.close()


def _start(tmp_path: Path, url: str, *extra: str) -> tuple[subprocess.Popen[str], queue.Queue]:
    config = tmp_path / "codemode.toml"
    config.write_text(f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_BASE_URL": url}
    env.pop("OPENAI_API_KEY", None)
    argv = [sys.executable, "-m", "codemode", "run", "What is 6*7?", "--config", str(config)]
    process = subprocess.Popen(
        [*argv, "--model", "openai:thinking", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def _wait_for(lines: queue.Queue, words: str) -> list[str]:
    seen: list[str] = []
    while True:
        line = lines.get(timeout=120)
        assert line is not None, f"the run ended before printing {words!r}: {''.join(seen)}"
        seen.append(line)
        if words in line:
            return seen


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_run_with_130_and_a_whole_json_record(tmp_path, silent_model_url, number):
    process, lines = _start(tmp_path, silent_model_url, "--json")
    try:
        seen = _wait_for(lines, "round 1/8: asking openai:thinking")
        assert "so far 0 tokens in, 0 out" in seen[-1] and "elapsed]" in seen[-1]
        process.send_signal(number)
        assert process.wait(timeout=120) == 130
    finally:
        process.kill()
        process.wait()
    assert process.stdout is not None
    record = json.loads(process.stdout.read())
    name = signal.Signals(number).name
    assert (record["status"], record["error"]) == ("interrupted", f"interrupted by {name}")
    assert len(record["rounds"]) == 1 and record["answer"] is None


def test_the_wait_for_a_slow_model_shows_on_stderr_and_ends_at_the_run_time_limit(
    tmp_path, silent_model_url
):
    process, lines = _start(tmp_path, silent_model_url, "--run-timeout", "3")
    try:
        assert process.wait(timeout=120) == 1
    finally:
        process.kill()
        process.wait()
    stderr = []
    while (line := lines.get(timeout=30)) is not None:
        stderr.append(line)
    text = "".join(stderr)
    assert "round 1/8: asking openai:thinking" in text
    assert process.stdout is not None
    out = process.stdout.read()
    assert "failed:" in out and "did not answer" in out and "--run-timeout" in out

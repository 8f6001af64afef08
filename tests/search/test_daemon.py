"""The per-user search daemon: a stored index answered without loading it in each CLI process,
started in the background by the first search (which answers in its own process meanwhile),
started once for concurrent first searches, idling out, and refused an unsafe directory."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from codemode.cli import search_command
from codemode.cli.main import main
from codemode.search.daemon import client
from codemode.search.daemon.runtime import runtime_dir
from codemode.search.store import IndexStore

WAIT_S = 60.0
DAEMON_MODULE = b"codemode.search.daemon.server"


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.02)


def _daemons(run: Path) -> dict[str, int]:
    """socket key -> pid of each daemon answering in ``run``."""
    found = {}
    for path in run.glob("s-*.sock"):
        key = path.name[2:-5]
        reply = client.ask(key, {"op": "ping"}, timeout=10)
        if reply is not None:
            found[key] = reply["pid"]
    return found


def _daemon_processes(run: Path) -> set[int]:
    """Live processes of daemons for ``run`` (started, starting, or listening on no socket)."""
    found = set()
    marker = f"CODEMODE_RUNTIME_DIR={run}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if DAEMON_MODULE not in (proc / "cmdline").read_bytes():
                continue
            if marker not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if "\nState:\tZ" in (proc / "status").read_text():
                continue
        except OSError:
            continue
        found.add(int(proc.name))
    return found


def _starting(run: Path) -> bool:
    """Whether a daemon start is under way: someone holds a key's lock file."""
    for path in run.glob("s-*.lock"):
        handle = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(handle)
    return False


def _wait_for_the_daemon(run: Path) -> None:
    """Wait until the daemon start under way has finished: its daemon then answers, as it keeps
    the lock until it listens."""
    _wait_for(lambda: not _starting(run), "the daemon start to finish")
    assert _daemons(run), "the start lock was free before a daemon listened"


@pytest.fixture
def run_dir(monkeypatch, tmp_path):
    # Short: a unix socket's path must fit in 108 bytes.
    run = Path(tempfile.mkdtemp(prefix="cm-", dir="/tmp"))
    monkeypatch.setenv("CODEMODE_RUNTIME_DIR", str(run))
    monkeypatch.setenv("CODEMODE_SEARCH_DAEMON", "1")
    monkeypatch.chdir(tmp_path)
    try:
        yield run
    finally:
        try:
            _wait_for(lambda: not _starting(run), "daemon starts to finish")
            for key in _daemons(run):
                client.stop(key)
            _wait_for(lambda: not _daemon_processes(run), "daemons to stop")
        finally:
            for pid in _daemon_processes(run):  # left only when a test failed (a second daemon)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(run, ignore_errors=True)


def _search(capsys, spec: Path, query: str, *extra: str) -> list[dict]:
    argv = ["search", query, "--openapi", str(spec), "--json", "--limit", "3", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _not_here(*args, **kwargs):
    raise AssertionError("answered in the CLI process, not by the daemon")


def test_searches_after_the_first_are_answered_by_the_daemon(
    run_dir, tiny_spec_file, capsys, monkeypatch
):
    first = _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic")  # stores
    assert not _daemon_processes(run_dir)
    second = _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic")  # starts it
    assert second == first and first[0]["tool"] == "refundCharge"
    _wait_for_the_daemon(run_dir)
    daemons = _daemons(run_dir)
    assert len(daemons) == 1
    monkeypatch.setattr("codemode.search.semantic.open_stored_index", _not_here)
    monkeypatch.setattr(search_command, "_search_through_engine", _not_here)
    third = _search(capsys, tiny_spec_file, "delete a customer", "--no-semantic")
    assert third[0]["tool"] == "deleteCustomer"
    assert _daemons(run_dir) == daemons  # the same daemon
    assert _daemon_processes(run_dir) == set(daemons.values())
    assert (run_dir / f"s-{next(iter(daemons))}.sock").stat().st_mode & 0o777 == 0o600


def test_concurrent_first_searches_start_one_daemon(run_dir, tiny_spec_file, capsys):
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic", "--no-daemon")
    key = search_command.input_key(None, [tiny_spec_file])
    assert key is not None and IndexStore().lookup_inputs(key) is not None
    answers: list[object] = []
    together = threading.Barrier(4, timeout=WAIT_S)

    def one() -> None:
        together.wait()
        answers.append(
            search_command._search_stored(key, "list invoices", 2, semantic=False, daemon=True)
        )

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert len(answers) == 4
    assert all(hits and hits[0].tool == "listInvoices" for hits in answers), answers
    _wait_for_the_daemon(run_dir)
    assert len(_daemon_processes(run_dir)) == 1
    assert len(_daemons(run_dir)) == 1
    assert len(list(run_dir.glob("s-*.sock"))) == 1


# Stands in front of the daemon: blocks until the test opens the FIFO for writing (at most the
# alarm's seconds), then becomes the daemon.
GATE = """
import os, signal, sys
signal.alarm(int(sys.argv[1]))
with open(sys.argv[2], "rb") as gate:
    gate.read()
os.execv(sys.argv[3], sys.argv[3:])
"""


def _open_gate(gate: Path) -> bool:
    """Let the gated daemon go on; False while nobody waits at the gate."""
    try:
        os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as error:
        if error.errno == errno.ENXIO:
            return False
        raise
    return True


def test_the_first_search_answers_without_waiting_for_the_daemon(
    run_dir, tiny_spec_file, capsys, monkeypatch, tmp_path
):
    expected = _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic")  # stores
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    server_command = client._server_command

    def gated(*args: object) -> list[str]:
        command = server_command(*args)
        return [sys.executable, "-c", GATE, str(int(2 * WAIT_S)), str(gate), *command]

    monkeypatch.setattr(client, "_server_command", gated)
    answers: list[list[dict]] = []
    first = threading.Thread(
        target=lambda: answers.append(
            _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic")
        )
    )
    try:
        first.start()
        first.join(WAIT_S)
        assert not first.is_alive(), "the first search waited for the daemon to start"
        assert answers == [expected]  # answered in its own process
        # The daemon's start is under way: it holds the key's lock and waits at the gate.
        assert _starting(run_dir) and not _daemons(run_dir)
        _wait_for(lambda: _open_gate(gate), "the daemon to reach the gate")
    finally:
        with contextlib.suppress(OSError):
            _open_gate(gate)
        first.join(WAIT_S)
    _wait_for_the_daemon(run_dir)
    monkeypatch.setattr("codemode.search.semantic.open_stored_index", _not_here)
    assert _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic") == expected
    assert len(_daemon_processes(run_dir)) == 1


def test_a_search_while_the_daemon_starts_starts_no_other(run_dir, tiny_spec_file, capsys):
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic", "--no-daemon")
    key = search_command.input_key(None, [tiny_spec_file])
    fingerprint = IndexStore().lookup_inputs(key) if key is not None else None
    assert fingerprint is not None
    daemon_key = search_command._daemon_key(fingerprint, False)
    assert daemon_key is not None
    lock = os.open(client.lock_path(run_dir, daemon_key), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a daemon being started holds it
        assert client.start_in_background(daemon_key, fingerprint, "lexical") is None
        hits = _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
        assert hits[0]["tool"] == "listInvoices"  # answered in the process
        assert not _daemon_processes(run_dir)
    finally:
        os.close(lock)
    started = client.start_in_background(daemon_key, fingerprint, "lexical")
    assert started is not None
    # It loads only once released (the starter's own search answered), holding the lock.
    assert _starting(run_dir) and not _daemons(run_dir)
    started.release()
    _wait_for_the_daemon(run_dir)
    # Under the lock it asks first: a daemon that answers is not started again.
    assert client.start_in_background(daemon_key, fingerprint, "lexical") is None
    assert len(_daemon_processes(run_dir)) == 1


def test_an_idle_daemon_exits(run_dir, tiny_spec_file, capsys, monkeypatch):
    monkeypatch.setenv("CODEMODE_SEARCH_IDLE_S", "2")
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")  # starts it
    _wait_for_the_daemon(run_dir)
    # Asked nothing more, it exits: its socket is removed and its process is gone.
    _wait_for(lambda: not list(run_dir.glob("s-*.sock")), "the idle daemon to remove its socket")
    _wait_for(lambda: not _daemon_processes(run_dir), "the idle daemon to exit")


def test_no_daemon_in_a_directory_others_can_enter(run_dir, tiny_spec_file, capsys):
    os.chmod(run_dir, 0o755)
    assert runtime_dir() is None
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    hits = _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    assert hits[0]["tool"] == "listInvoices"  # answered in the process
    assert not list(run_dir.glob("s-*"))
    assert not _daemon_processes(run_dir)


@pytest.mark.needs_model
def test_a_semantic_daemon_answers_like_the_process(run_dir, tiny_spec_file, capsys, monkeypatch):
    here = _search(capsys, tiny_spec_file, "give money back to a buyer", "--no-daemon")
    _search(capsys, tiny_spec_file, "give money back to a buyer")  # starts it
    _wait_for_the_daemon(run_dir)
    assert len(_daemons(run_dir)) == 1
    monkeypatch.setattr("codemode.search.semantic.open_stored_index", _not_here)
    there = _search(capsys, tiny_spec_file, "give money back to a buyer")
    (key,) = _daemons(run_dir)
    assert [h["tool"] for h in there] == [h["tool"] for h in here]
    # Its query runs on 8-bit weights (the process's on numpy, float32): scores within 0.01.
    assert [h["score"] for h in there] == pytest.approx([h["score"] for h in here], abs=0.01)
    # It embeds on ONNX Runtime (nobody waits for its start), with the process's answers.
    ping = client.ask(key, {"op": "ping"}, timeout=WAIT_S)
    assert (ping["encoder"], ping["query_precision"]) == ("onnx", "int8")

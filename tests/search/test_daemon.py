"""The per-user search daemon: a stored index answered without loading it in each CLI process,
started once for concurrent first searches, idling out, and refused an unsafe directory."""

from __future__ import annotations

import json
import os
import shutil
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


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


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
        pids = _daemons(run)
        for key in pids:
            client.stop(key)
        _wait_for(lambda: all(_gone(pid) for pid in pids.values()), "daemons to stop")
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
    assert not _daemons(run_dir)
    second = _search(capsys, tiny_spec_file, "refund a charge", "--no-semantic")
    daemons = _daemons(run_dir)
    assert len(daemons) == 1
    assert second == first and first[0]["tool"] == "refundCharge"
    monkeypatch.setattr("codemode.search.semantic.open_stored_index", _not_here)
    monkeypatch.setattr(search_command, "_search_through_engine", _not_here)
    third = _search(capsys, tiny_spec_file, "delete a customer", "--no-semantic")
    assert third[0]["tool"] == "deleteCustomer"
    assert _daemons(run_dir) == daemons  # the same daemon
    assert (run_dir / f"s-{next(iter(daemons))}.sock").stat().st_mode & 0o777 == 0o600


def test_concurrent_first_searches_start_one_daemon(run_dir, tiny_spec_file, capsys):
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic", "--no-daemon")
    fingerprint = IndexStore().lookup_inputs(search_command.input_key(None, [tiny_spec_file]))
    assert fingerprint is not None
    answers: list[object] = []

    def one() -> None:
        answers.append(search_command._search_by_daemon(fingerprint, False, "list invoices", 2))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert len(answers) == 4
    assert all(hits and hits[0].tool == "listInvoices" for hits in answers), answers
    assert len(_daemons(run_dir)) == 1
    assert len(list(run_dir.glob("s-*.sock"))) == 1


def test_an_idle_daemon_exits(run_dir, tiny_spec_file, capsys, monkeypatch):
    monkeypatch.setenv("CODEMODE_SEARCH_IDLE_S", "0.3")
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    # It may already be gone: wait for the socket to be removed, then for no daemon to answer.
    _wait_for(lambda: not list(run_dir.glob("s-*.sock")), "the idle daemon to remove its socket")
    assert not _daemons(run_dir)


def test_no_daemon_in_a_directory_others_can_enter(run_dir, tiny_spec_file, capsys):
    os.chmod(run_dir, 0o755)
    assert runtime_dir() is None
    _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    hits = _search(capsys, tiny_spec_file, "list invoices", "--no-semantic")
    assert hits[0]["tool"] == "listInvoices"  # answered in the process
    assert not list(run_dir.glob("s-*"))


@pytest.mark.needs_model
def test_a_semantic_daemon_answers_like_the_process(run_dir, tiny_spec_file, capsys):
    here = _search(capsys, tiny_spec_file, "give money back to a buyer", "--no-daemon")
    there = _search(capsys, tiny_spec_file, "give money back to a buyer")
    (key,) = _daemons(run_dir)
    assert [h["tool"] for h in there] == [h["tool"] for h in here]
    assert [h["score"] for h in there] == pytest.approx([h["score"] for h in here], abs=1e-5)
    # It answered its first query on numpy (what the starting CLI waits for), then moved to
    # ONNX Runtime before answering anything else: the same answers from then on.
    assert client.ask(key, {"op": "ping"}, timeout=WAIT_S)["encoder"] == "onnx"
    later = _search(capsys, tiny_spec_file, "give money back to a buyer")
    assert [h["tool"] for h in later] == [h["tool"] for h in here]
    assert [h["score"] for h in later] == pytest.approx([h["score"] for h in here], abs=1e-5)

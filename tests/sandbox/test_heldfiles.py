"""Files kept open and read again in place: always the file's text now, and always the
process they were opened for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.sandbox.heldfiles import HeldFiles
from codemode.sandbox.proctree import read_small


def state_of(text: str) -> str:
    return text.rsplit(")", 1)[1].split(maxsplit=1)[0]


def test_a_held_file_reads_the_text_as_it_is_now() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    held = HeldFiles()
    try:
        path = f"/proc/{child.pid}/stat"
        assert state_of(held.read(path)) in ("R", "S", "D")
        child.send_signal(signal.SIGSTOP)
        os.waitid(os.P_PID, child.pid, os.WSTOPPED)
        assert state_of(held.read(path)) == "T"  # the same descriptor, rendered afresh
        assert len(held) == 1
    finally:
        child.kill()
        child.wait()
        held.close()


def test_a_held_proc_file_never_reads_another_process() -> None:
    """Once its process has ended, a held /proc file reads as an error, whatever now has
    the pid (a path read afresh could read a stranger)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    held = HeldFiles()
    try:
        held.read(f"/proc/{child.pid}/stat")
        child.wait()
        with pytest.raises(OSError):
            held.read(f"/proc/{child.pid}/stat")
    finally:
        held.close()


def test_a_closed_set_reads_paths_afresh_and_holds_nothing(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("1")
    held = HeldFiles()
    assert held.read(str(counter)) == "1"
    held.close()
    assert len(held) == 0
    counter.write_text("22")
    assert held.read(str(counter)) == "22"
    assert len(held) == 0
    with pytest.raises(OSError):
        held.read(str(tmp_path / "missing"))


def test_a_file_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_text("x" * 200_000)
    held = HeldFiles()
    try:
        assert len(held.read(str(big))) == 200_000
    finally:
        held.close()


def test_a_seq_file_longer_than_a_page_is_read_whole() -> None:
    """A seq file gives about a page per read however much is asked for (a sandbox with
    a thousand sockets has a /proc net/unix of 100 KiB): every line must be counted."""
    code = "import ctypes, decimal, ssl, sqlite3, time; print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    held = HeldFiles()
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        child.send_signal(signal.SIGSTOP)
        os.waitid(os.P_PID, child.pid, os.WSTOPPED)
        path = f"/proc/{child.pid}/maps"
        whole = read_small(path)
        assert len(whole) > 3 * 4096, "the interpreter's map is expected to span pages"
        assert held.read(path) == whole
        assert held.read(path) == whole  # and again, from the same descriptor
    finally:
        child.kill()
        child.wait()
        held.close()


def test_a_process_memory_is_read_at_an_address_through_one_held_descriptor() -> None:
    """What the guest polls is read from its memory (/proc/<pid>/mem, at the address its
    poll was given): the bytes there now, through a descriptor opened once."""
    code = (
        "import ctypes, sys, time\n"
        "buffer = ctypes.create_string_buffer(b'bridge-7', 8)\n"
        "print(ctypes.addressof(buffer), flush=True)\n"
        "sys.stdin.readline()\n"
        "buffer.value = b'bridge-8'\n"
        "print('changed', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    held = HeldFiles()
    try:
        address = int(child.stdout.readline())
        path = f"/proc/{child.pid}/mem"
        assert held.read_at(path, address, 8) == b"bridge-7"
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "changed\n"
        assert held.read_at(path, address, 8) == b"bridge-8"
        assert held.read_at(path, address + 2, 4) == b"idge"
        assert len(held) == 1
        held.close()
        assert held.read_at(path, address, 6) == b"bridge"  # closed: opened afresh
    finally:
        child.kill()
        child.wait()
        held.close()

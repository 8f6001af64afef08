"""This machine's floors under the sandbox's targets: the same work done the plainest way (no
isolation, no policy, no codemode), measured here and now.

    .venv/bin/python benchmarks/floors.py [--rounds N] [--json] [--smoke]

A target below its floor cannot be met on this machine by any design that keeps the work: a
process per sandbox, Python on both sides of the bridge. A target above its floor says how much
room the design has. VMs differ several times in what a wake-up and a cold cache cost, so run
this beside ``benchmarks/sandbox.py`` and ``benchmarks/engine.py``, not against another day's
numbers.

F1 warm execution (W1's floor): two plain processes, the child forked from this one, a socket
   pair, msgpack frames; the parent sends ``print(1+1)``, the child compiles and runs it with
   its output captured and sends the output back. As the scheduler places them, and both on
   one CPU; and with the child stopped between executions (SIGSTOP, waited for; SIGCONT after
   the next frame), as a sandbox is where nothing proves that it rests.
F2 a tool call's round trip (W2's): the same two processes trading a small call frame and its
   reply, JSON each way; both on one CPU (as the runner arranges a chatty execution) and as
   placed.
F3 the engine's hand-over (part of E4): an asyncio loop hands a job to a waiting thread and
   awaits its answer, as the engine runs a sandbox's blocking calls; as placed and on one CPU.
   E4's target (0.1 ms) holds the whole engine around an instant sandbox, this hand-over one
   part of it.
F4 the dense scan (the privacy scan's, per MiB): Hyperscan's pass over codemode's anchors with
   a callback that only counts, and one Python tuple per place it reports (no check, no
   merge): what a scan with its checks in Python costs before it checks anything. Digit-dense
   prose and contact lines, the texts of ``benchmarks/privacy.py``.

Medians of ``--rounds`` rounds, with their range.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import queue
import signal
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

_LENGTH = struct.Struct(">I")


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def _one_cpu() -> set[int] | None:
    """The CPU both sides take when pinned (None: no affinity here, or one CPU only)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    return {min(allowed)} if len(allowed) > 1 else None


@contextlib.contextmanager
def _pinned(cpu: set[int] | None) -> Iterator[None]:
    """This thread on ``cpu`` meanwhile (None: left where it is)."""
    if cpu is None:
        yield
        return
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpu)
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(body)) + body)


def _receive(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    (size,) = _LENGTH.unpack_from(data)
    while len(data) < size + 4:
        more = sock.recv(65536)
        if not more:
            raise EOFError("the other side closed")
        data += more
    return data[4:]


class _Child:
    """A forked plain process answering frames with ``answer`` until it gets an empty one."""

    def __init__(self, answer: Callable[[bytes], bytes], cpu: set[int] | None) -> None:
        self.sock, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child
            try:
                self.sock.close()
                if cpu is not None:
                    os.sched_setaffinity(0, cpu)
                while body := _receive(theirs):
                    _send(theirs, answer(body))
            finally:
                os._exit(0)
        theirs.close()

    def ask(self, body: bytes) -> bytes:
        _send(self.sock, body)
        return _receive(self.sock)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)
            _send(self.sock, b"")
        self.sock.close()
        os.waitpid(self.pid, 0)


_SCOPE: dict[str, Any] = {"__name__": "__main__"}  # the child's globals, kept between runs


def _run_code(body: bytes) -> bytes:
    frame = msgpack.unpackb(body)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(frame["code"], "<code>", "exec"), _SCOPE)
    return msgpack.packb({"op": "done", "ok": True, "stdout": output.getvalue()})


def warm_execution_us(executions: int, *, pinned: bool, stopped: bool) -> float:
    """F1: p50 of ``print(1+1)`` run by a plain child process (see the module's notes)."""
    cpu = _one_cpu() if pinned else None
    frame = msgpack.packb({"op": "exec", "code": "print(1+1)"})
    samples: list[float] = []
    with _pinned(cpu):
        child = _Child(_run_code, cpu)
        try:
            if stopped:
                os.kill(child.pid, signal.SIGSTOP)
                os.waitpid(child.pid, os.WUNTRACED)
            for _ in range(executions):
                started = time.perf_counter()
                _send(child.sock, frame)
                if stopped:
                    os.kill(child.pid, signal.SIGCONT)
                reply = msgpack.unpackb(_receive(child.sock))
                if stopped:
                    os.kill(child.pid, signal.SIGSTOP)
                    os.waitpid(child.pid, os.WUNTRACED)
                samples.append(time.perf_counter() - started)
                assert reply["stdout"] == "2\n", reply
        finally:
            child.close()
    return median_of(samples) * 1e6


def _reply_to_call(body: bytes) -> bytes:
    request = json.loads(body)
    return json.dumps({"op": "reply", "id": request["id"], "ok": True, "value": 2}).encode()


def round_trip_us(calls: int, *, pinned: bool = True) -> float:
    """F2: p50 of a small frame's round trip between two plain Python processes over a socket
    pair (JSON each way, a 4-byte length before it): what a tool call costs on this machine
    with no sandbox, no policy and no bridge. ``pinned``: both sides on one CPU, as the runner
    arranges a chatty execution."""
    cpu = _one_cpu() if pinned else None
    frame = {"op": "call", "server": "math", "tool": "add", "args": {"a": 1, "b": 1}, "id": 0}
    samples: list[float] = []
    with _pinned(cpu):
        child = _Child(_reply_to_call, cpu)
        try:
            for number in range(calls):
                started = time.perf_counter()
                reply = json.loads(child.ask(json.dumps({**frame, "id": number}).encode()))
                samples.append(time.perf_counter() - started)
                assert reply["id"] == number, reply
        finally:
            child.close()
    return median_of(samples) * 1e6


async def _hand_overs(jobs: int) -> list[float]:
    loop = asyncio.get_running_loop()
    waiting: queue.SimpleQueue[asyncio.Future[int] | None] = queue.SimpleQueue()

    def worker() -> None:
        while (future := waiting.get()) is not None:
            loop.call_soon_threadsafe(future.set_result, 2)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    samples: list[float] = []
    try:
        for _ in range(jobs):
            started = time.perf_counter()
            future: asyncio.Future[int] = loop.create_future()
            waiting.put(future)
            await future
            samples.append(time.perf_counter() - started)
    finally:
        waiting.put(None)
        thread.join()
    return samples


def hand_over_us(jobs: int, *, pinned: bool) -> float:
    """F3: p50 of a job handed from an asyncio loop to a thread and answered back (the
    thread inherits the pin)."""
    with _pinned(_one_cpu() if pinned else None):
        samples = asyncio.run(_hand_overs(jobs))
    return median_of(samples) * 1e6


def scan_floor_ms_per_mib(text: str, repeat: int) -> tuple[float, float, int] | None:
    """F4: CPU ms per MiB of Hyperscan's pass over codemode's anchors (a callback that only
    counts), and of one tuple per reported place; and how many places (None: no Hyperscan)."""
    from codemode.privacy.native import native_scanner
    from codemode.privacy.scantext import ScanText

    scanner = native_scanner()
    if scanner is None:
        return None
    raw = ScanText(text).raw
    mib = len(text) / (1 << 20)
    count = [0]

    def counted(*_: object) -> None:
        count[0] += 1

    # The scanner's own database and pass: what ``hits`` runs, minus its lists of places.
    database = scanner._db
    scratch = scanner._hs.Scratch(database)
    places = sorted(end for ends in scanner.hits(raw) for end in ends)
    spans = [(max(0, end - 12), end) for end in places]

    def cpu_ms(work: Callable[[], object]) -> float:
        samples = []
        for _ in range(repeat):
            started = time.process_time()
            work()
            samples.append(time.process_time() - started)
        return median_of(samples) * 1e3 / mib

    passing = cpu_ms(lambda: database.scan(raw, match_event_handler=counted, scratch=scratch))
    tuples = cpu_ms(lambda: [("KIND", start, end, text[start:end]) for start, end in spans])
    return passing, tuples, len(places)


def _spread(values: list[float]) -> str:
    return f"{min(values):.3g}-{max(values):.3g}" if len(values) > 1 else ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (median shown)")
    parser.add_argument("--smoke", action="store_true", help="one short round: does it run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rounds = 1 if args.smoke else max(1, args.rounds)
    executions, calls, jobs = (20, 50, 50) if args.smoke else (1000, 2000, 3000)

    measured: dict[str, list[float]] = {}

    def take(name: str, value: float) -> None:
        measured.setdefault(name, []).append(value)

    # The forks first: no thread of this process runs yet.
    for _ in range(rounds):
        for pinned in (False, True):
            for stopped in (False, True):
                where = "one CPU" if pinned else "as placed"
                rest = ", stopped between" if stopped else ""
                take(
                    f"F1 warm execution p50, {where}{rest} (us)",
                    warm_execution_us(executions, pinned=pinned, stopped=stopped),
                )
        take("F2 round trip p50, one CPU (us)", round_trip_us(calls, pinned=True))
        take("F2 round trip p50, as placed (us)", round_trip_us(calls, pinned=False))
    for _ in range(rounds):
        take("F3 hand-over p50, as placed (us)", hand_over_us(jobs, pinned=False))
        take("F3 hand-over p50, one CPU (us)", hand_over_us(jobs, pinned=True))
    from privacy import texts_of  # benchmarks/privacy.py: the detect rows' texts

    texts = texts_of(1 << 16 if args.smoke else 1 << 20)
    for name in ("numeric", "contacts"):
        found = scan_floor_ms_per_mib(texts[name], 3 if args.smoke else 7)
        if found is None:
            continue
        passing, tuples, places = found
        take(f"F4 {name}: Hyperscan's pass (ms/MiB)", passing)
        take(f"F4 {name}: one tuple per place, {places:,} places (ms/MiB)", tuples)
        take(f"F4 {name}: the two together (ms/MiB)", passing + tuples)

    targets = {
        "F1": ("W1 <= 150 us", 150.0),
        "F2": ("W2 <= 26 us", 26.0),
        "F3": ("E4 <= 100 us (all of it)", 100.0),
        "F4": ("<= 15 ms/MiB", 15.0),
    }
    rows = []
    for name, values in measured.items():
        label, target = targets[name[:2]]
        value = median_of(values)
        share = f"{value / target:.2f} of it" if "together" in name or name[:2] != "F4" else ""
        rows.append((name, value, _spread(values), label, share))
    if args.json:
        print(
            json.dumps(
                {name: {"median": value, "runs": measured[name]} for name, value, *_ in rows}
            )
        )
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"this machine's floors: {os.cpu_count()} CPUs, load {load:.2f}, {rounds} round(s)")
    print(f"{'floor':62} {'median':>9} {'range':>13}  {'target':26} floor/target")
    for name, value, spread, label, share in rows:
        print(f"{name:62} {value:9.1f} {spread:>13}  {label:26} {share}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

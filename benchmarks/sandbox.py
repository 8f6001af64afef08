"""Sandbox benchmarks W1-W4 with full isolation on, beside baselines measured in the same run.

    .venv/bin/python benchmarks/sandbox.py [--quick] [--json] [--load N]

W1  print(1+1): warm session; new session from the warm pool; cold start with no pool
W2  1,000 calls of a host tool add(a, b): per-call round trip (timed inside the sandbox)
W3  a 10 MB string returned by one host tool and passed to another
W4  pure-Python sum of squares to 5e6, as a ratio to host CPython
idle memory of one sandbox (RSS of its processes)

Baselines: a plain `python -I -S` subprocess and in-process exec; for W2, two plain Python
processes trading a small JSON frame over a socket pair on one CPU (this machine's floor for a
round trip between processes: VMs differ by several times in it; `benchmarks/floors.py` has
this and the other targets' floors). Medians of repeated runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codemode.bridge.host import ToolAccess
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation
from codemode.tools import ToolCall

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floors import round_trip_us  # this machine's floor for W2


class HostTools:
    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool == "add":
            return call.arguments["a"] + call.arguments["b"]
        if call.tool == "blob":
            return "x" * call.arguments["n"]
        if call.tool == "size":
            return len(call.arguments["text"])
        raise KeyError(call.tool)


def ms(seconds: float) -> float:
    return seconds * 1000


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def machine_cpu_s() -> float | None:
    """CPU seconds every CPU of the machine has been busy so far (/proc/stat; None elsewhere):
    user, nice, system, irq and softirq time. Not steal time, when the hypervisor ran someone
    else on these CPUs (on a busy host it made the reading up to twice as large)."""
    try:
        fields = [
            int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        ]
        user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def start_cpu_ms(pool: SandboxPool, batch: int) -> tuple[float, float] | None:
    """The machine's CPU per sandbox started (ms), and this process's share, over ``batch``
    starts in a row on an otherwise idle machine: what a burst of new sessions pays per
    sandbox beside the sessions' own work (the template's fork, the namespaces, the guest's
    setup, the host's cgroups and bookkeeping). None where /proc/stat is not there."""
    machine, own = machine_cpu_s(), time.process_time()  # every thread's
    if machine is None:
        return None
    started = [pool.spawn() for _ in range(batch)]
    after = machine_cpu_s()
    assert after is not None
    shares = ((after - machine) / batch * 1000, (time.process_time() - own) / batch * 1000)
    for sandbox in started:
        sandbox.kill()
    return shares


def cpu_of(session: SandboxSession) -> float:
    """CPU seconds the session's sandbox has used (its meter's reading)."""
    assert session.sandbox is not None
    return session.sandbox.process.meter.cpu_seconds()


def rss_kib(pid: int) -> int:
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            pending += [
                int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()
            ]
        except OSError:
            continue
    return total


def guest_rss_kib(pid: int) -> int:
    """RSS of the guest interpreter alone (the deepest process of the sandbox)."""
    current = pid
    while True:
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            break
        if not children:
            break
        current = int(children[0])
    for line in Path(f"/proc/{current}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--smoke", action="store_true", help="one of each: does it still run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="also measure the warm execution beside N busy processes (a load of N)",
    )
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0

    def reps(full: int, least: int) -> int:
        return 1 if args.smoke else max(int(full * scale), least)

    rows: list[tuple[str, str, str, str]] = []
    numbers: dict[str, float] = {}
    # Before any thread starts: the measurement forks.
    floors = [round_trip_us(200 if args.smoke else 2000) for _ in range(reps(5, 3))]

    backend = BwrapBackend(SandboxSettings(pool_size=2))
    pool = SandboxPool(backend, size=2).start()
    session = SandboxSession(pool, "bench")
    session.execute("pass")
    assert session.sandbox is not None
    require_isolation(session.sandbox)
    tools = HostTools()

    # --- W1 -------------------------------------------------------------------------------
    # The pool refills the sandbox the session took, in other processes: not the warm path.
    pool.wait_full()
    for _ in range(reps(50, 50)):
        session.execute("print(1+1)")
    # CPU per execution beside the wall time: on a loaded machine the wall time follows the
    # scheduler; the host's and the guest's CPU much less.
    host_cpu, guest_cpu = time.process_time(), cpu_of(session)
    warm = timed(lambda: session.execute("print(1+1)"), reps(1000, 1))
    host_cpu = (time.process_time() - host_cpu) / len(warm)
    guest_cpu = (cpu_of(session) - guest_cpu) / len(warm)
    if args.load:
        # N processes that never sleep: the machine at load N, as the kernel counts it.
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
        ]
        try:
            time.sleep(1.0)  # let the scheduler spread them
            loaded = timed(lambda: session.execute("print(1+1)"), reps(1000, 1))
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
        numbers[f"w1_warm_load{args.load}_p50_ms"] = ms(median_of(loaded))
        rows.append(
            (
                f"W1 warm execution p50 at load {args.load}",
                f"{ms(median_of(loaded)):.3f} ms",
                "<= 0.3 ms",
                f"{args.load} busy processes beside it; p95 {ms(p(loaded, 0.95)):.3f} ms",
            )
        )
    inproc_code = compile("x = 1+1", "<bench>", "exec")
    inproc = timed(lambda: exec(inproc_code, {}), 1000)
    subproc = timed(
        lambda: subprocess.run(
            [sys.executable, "-I", "-S", "-c", "print(1+1)"], check=True, capture_output=True
        ),
        reps(30, 5),
    )
    new_from_pool = []
    for _ in range(reps(30, 5)):
        pool.wait_full(30)
        start = time.perf_counter()
        fresh = SandboxSession(pool, "new")
        fresh.execute("print(1+1)")
        new_from_pool.append(time.perf_counter() - start)
        fresh.close()
    cold_pool = SandboxPool(backend, size=0)
    cold = []
    for _ in range(reps(20, 5)):
        start = time.perf_counter()
        sandbox = cold_pool.spawn()
        sandbox.execute("print(1+1)")
        cold.append(time.perf_counter() - start)
        sandbox.kill()
    start_costs = [start_cpu_ms(cold_pool, reps(40, 20)) for _ in range(reps(5, 3))]
    cold_pool.close()
    numbers |= {
        "w1_warm_p50_ms": ms(median_of(warm)),
        "w1_warm_p95_ms": ms(p(warm, 0.95)),
        "w1_warm_host_cpu_ms": ms(host_cpu),
        "w1_warm_guest_cpu_ms": ms(guest_cpu),
        "w1_new_session_from_pool_p50_ms": ms(median_of(new_from_pool)),
        "w1_cold_start_p50_ms": ms(median_of(cold)),
        "baseline_subprocess_python_p50_ms": ms(median_of(subproc)),
        "baseline_inprocess_exec_p50_ms": ms(median_of(inproc)),
    }
    measured = [cost for cost in start_costs if cost is not None]
    if measured:
        numbers |= {
            "start_machine_cpu_ms": median_of([machine for machine, _own in measured]),
            "start_host_cpu_ms": median_of([own for _machine, own in measured]),
        }
    rows += [
        (
            "W1 warm execution p50",
            f"{numbers['w1_warm_p50_ms']:.3f} ms",
            "<= 0.15 ms",
            f"{numbers['baseline_subprocess_python_p50_ms'] / numbers['w1_warm_p50_ms']:.0f}x faster than python -I -S subprocess",
        ),
        (
            "   CPU per warm execution",
            f"{numbers['w1_warm_host_cpu_ms']:.3f} ms",
            "",
            f"host (all threads); guest {numbers['w1_warm_guest_cpu_ms']:.3f} ms",
        ),
        (
            "W1 new session from pool p50",
            f"{numbers['w1_new_session_from_pool_p50_ms']:.2f} ms",
            "<= 3.5 ms",
            "",
        ),
        (
            "W1 cold start, no pool p50",
            f"{numbers['w1_cold_start_p50_ms']:.1f} ms",
            "<= 32 ms",
            f"subprocess python: {numbers['baseline_subprocess_python_p50_ms']:.1f} ms",
        ),
        *(
            [
                (
                    "   machine CPU per sandbox started",
                    f"{numbers['start_machine_cpu_ms']:.1f} ms",
                    "",
                    f"this process {numbers['start_host_cpu_ms']:.1f} ms; the rest the "
                    "template's fork, the namespaces, the guest's setup",
                )
            ]
            if "start_machine_cpu_ms" in numbers
            else []
        ),
        (
            "   baseline in-process exec p50",
            f"{numbers['baseline_inprocess_exec_p50_ms'] * 1000:.1f} us",
            "",
            "",
        ),
    ]

    # --- W2 -------------------------------------------------------------------------------
    code = (
        "import time\nfrom servers._runtime import call_tool\n"
        "lat = []\n"
        "for i in range(1000):\n"
        "    t = time.perf_counter(); call_tool('math', 'add', {'a': i, 'b': 1}); "
        "lat.append(time.perf_counter() - t)\n"
        "lat.sort(); print(lat[500] * 1e6, lat[950] * 1e6, sum(lat) * 1e3)\n"
    )
    runs = [
        session.execute(code, tools=ToolAccess(tools)).stdout.split() for _ in range(reps(5, 3))
    ]
    p50s = [float(r[0]) for r in runs]
    p95s = [float(r[1]) for r in runs]
    totals = [float(r[2]) for r in runs]

    def local_add(a: int, b: int) -> int:
        return a + b

    local = timed(lambda: [local_add(i, 1) for i in range(1000)], 20)
    numbers |= {
        "w2_roundtrip_p50_us": median_of(p50s),
        "w2_roundtrip_p95_us": median_of(p95s),
        "w2_1000_calls_ms": median_of(totals),
        "baseline_inprocess_1000_calls_ms": ms(median_of(local)),
        "baseline_one_cpu_round_trip_us": median_of(floors),
    }
    rows += [
        (
            "W2 tool call round trip p50",
            f"{numbers['w2_roundtrip_p50_us']:.1f} us",
            "<= 26 us",
            f"p95 {numbers['w2_roundtrip_p95_us']:.1f} us; 1,000 calls {numbers['w2_1000_calls_ms']:.1f} ms "
            f"(in-process: {numbers['baseline_inprocess_1000_calls_ms']:.3f} ms)",
        ),
        (
            "   baseline round trip, one CPU",
            f"{numbers['baseline_one_cpu_round_trip_us']:.1f} us",
            "",
            "two plain Python processes, a socket pair, JSON each way: "
            f"W2 is {numbers['w2_roundtrip_p50_us'] / numbers['baseline_one_cpu_round_trip_us']:.1f}x",
        ),
    ]

    # --- W3 -------------------------------------------------------------------------------
    code = (
        "import time\nfrom servers._runtime import call_tool\n"
        "t = time.perf_counter()\n"
        "blob = call_tool('files', 'blob', {'n': 10_000_000})\n"
        "n = call_tool('files', 'size', {'text': blob})\n"
        "print((time.perf_counter() - t) * 1e3, n)\n"
    )
    w3 = [
        float(session.execute(code, tools=ToolAccess(tools)).stdout.split()[0])
        for _ in range(reps(9, 3))
    ]
    blob_local = timed(
        lambda: len(tools.invoke(ToolCall("f", "blob", {"n": 10_000_000}), timeout_s=1)), 5
    )
    numbers |= {
        "w3_10mb_through_two_tools_ms": median_of(w3),
        "baseline_inprocess_10mb_ms": ms(median_of(blob_local)),
    }
    rows.append(
        (
            "W3 10 MB tool -> code -> tool",
            f"{numbers['w3_10mb_through_two_tools_ms']:.1f} ms",
            "<= 20 ms",
            f"in-process: {numbers['baseline_inprocess_10mb_ms']:.1f} ms",
        )
    )

    # --- W4 -------------------------------------------------------------------------------
    work = "t = time.perf_counter()\ns = 0\nfor i in range(5_000_000):\n    s += i * i\nelapsed = time.perf_counter() - t\n"
    repeats = reps(5, 3)
    inside = [
        float(session.execute("import time\n" + work + "print(elapsed)").stdout)
        for _ in range(repeats)
    ]
    host = []
    for _ in range(repeats):
        namespace: dict[str, Any] = {"time": time}
        exec(compile(work, "<w4>", "exec"), namespace)
        host.append(namespace["elapsed"])
    numbers |= {
        "w4_sandbox_s": median_of(inside),
        "w4_host_s": median_of(host),
        "w4_ratio": median_of(inside) / median_of(host),
    }
    rows.append(
        (
            "W4 sum of squares to 5e6",
            f"{numbers['w4_ratio']:.2f}x CPython",
            "<= 1.1x",
            f"sandbox {numbers['w4_sandbox_s']:.3f} s, host {numbers['w4_host_s']:.3f} s",
        )
    )

    # --- idle memory ------------------------------------------------------------------------
    idle = SandboxSession(pool, "idle")
    idle.execute("pass")
    assert idle.sandbox is not None
    pid = idle.sandbox.process.pid
    numbers |= {
        "idle_guest_rss_mib": guest_rss_kib(pid) / 1024,
        "idle_sandbox_rss_mib": rss_kib(pid) / 1024,
    }
    rows.append(
        (
            "Idle sandbox RSS (guest)",
            f"{numbers['idle_guest_rss_mib']:.1f} MiB",
            "<= 15 MB",
            f"all its processes incl. 2 bwrap: {numbers['idle_sandbox_rss_mib']:.1f} MiB",
        )
    )
    idle.close()
    session.close()
    pool.close()

    if args.json:
        print(json.dumps(numbers, indent=2))
        return 0
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'benchmark':<{width}}{'measured':>16}  {'target':>10}  notes")
    for name, value, target, note in rows:
        print(f"{name:<{width}}{value:>16}  {target:>10}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

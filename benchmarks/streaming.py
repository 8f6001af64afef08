"""What streaming output costs: executions with an ``on_output`` callback beside the same
executions without one, in the same sandbox, in the same run. Medians; ratios, not times.

    .venv/bin/python benchmarks/streaming.py [--quick] [--json]

quiet   print(1) in a warm session (the callback is called once)
lines   100,000 printed lines (with a callback the guest line-buffers its stdout: one write,
        one host wake-up and one callback per line)
"""

from __future__ import annotations

import argparse
import json
import statistics

from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings

LINES = "for i in range(100000):\n    print(i)\n"


def _medians_ms(session: SandboxSession, code: str, runs: int) -> tuple[float, float]:
    """(without a callback, with one), alternating so that load on the machine hits both."""
    received = bytearray()

    def on_output(stream: str, data: bytes) -> None:
        received.extend(data)

    plain: list[float] = []
    streamed: list[float] = []
    for _ in range(runs):
        for durations, callback in ((plain, None), (streamed, on_output)):
            result = session.execute(code, on_output=callback)
            assert result.status == "ok", result.render_text()
            durations.append(result.duration_ms)
    return statistics.median(plain), statistics.median(streamed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--smoke", action="store_true", help="one run each: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    quiet_runs, line_runs = (1, 1) if args.smoke else (50, 3) if args.quick else (300, 7)
    with SandboxPool(BwrapBackend(SandboxSettings(pool_size=1)), 1) as pool:
        session = SandboxSession(pool)
        session.execute("pass")  # warm
        rows = {}
        for name, code, runs in (("quiet", "print(1)", quiet_runs), ("lines", LINES, line_runs)):
            plain, streamed = _medians_ms(session, code, runs)
            rows[name] = {
                "plain_ms": round(plain, 3),
                "streamed_ms": round(streamed, 3),
                "ratio": round(streamed / plain, 2),
            }
        session.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for name, row in rows.items():
        print(
            f"{name:<6} plain {row['plain_ms']:>9.3f} ms  streamed {row['streamed_ms']:>9.3f} ms"
            f"  ratio {row['ratio']:.2f}"
        )


if __name__ == "__main__":
    main()

"""Engine-level warm execution, beside the sandbox-level figure, in one process.

    .venv/bin/python benchmarks/engine.py [--rounds N] [--json]

E1  `print(1+1)` in a warm session through the whole engine: session lookup, the invoker chain
    (audit, policy, privacy on), the sandbox, and result finishing (the PII scan of the output)
E2  the same code on the sandbox session directly (no engine), as the baseline
E3  one tool call through the chain (audit -> policy -> privacy -> catalog) from a warm session
E4  the engine around a twin sandbox that answers at once (session, check, thread hop, result
    finishing): the engine's own cost, which E1 adds to E2
E5  a loop of tool calls from code (a sync Python function): each call's round trip through
    the bridge and the chain, timed inside the sandbox (p50 over the loop); the bridge alone
    is W2 in ``sandbox.py``
E6  the audit digest of a call's 1 MB text argument (keyed, as the gateway keys it): the
    canonical JSON in pieces (``audit/canonical.py``) against the whole ``json.dumps`` as the
    baseline, with this thread's CPU time (the JSON encoding holds the GIL the guards need
    meanwhile; the hashing lets go of it)

Medians of ``--rounds`` rounds of 200 executions each, isolation on (bubblewrap). Beside the
wall time, the host CPU per execution (this process, all threads): on a loaded machine wall
times follow the scheduler, CPU times much less.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode.audit.events import argument_digest
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox import SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation
from codemode.sandbox.result import ExecutionResult
from codemode.skills.session import KeepingSandbox

PER_ROUND = 200


class InstantSandbox:
    """A twin sandbox that answers at once: what is left is the engine's own cost."""

    def execute(self, code: str, **_: Any) -> ExecutionResult:
        return ExecutionResult(
            status="ok",
            exit_code=0,
            stdout="2\n",
            stderr="",
            error=None,
            files={"created": [], "modified": [], "deleted": []},
            tool_calls={"count": 0, "failures": 0, "by_tool": {}},
            duration_ms=0.0,
            truncated={"stdout_bytes": 0, "stderr_bytes": 0},
            hint="",
        )

    def close(self) -> None:
        return None


class InstantSandboxes:
    """A ``SandboxProvider`` of instant sandboxes."""

    has_workspace = False
    isolated = False

    def open(self, session_id: str) -> InstantSandbox:
        return InstantSandbox()

    def close(self) -> None:
        return None


async def engine_overhead_us(
    config: CodemodeConfig, rounds: int, per_round: int
) -> tuple[float, float]:
    """(p50 wall, CPU) in microseconds of one warm execute around an instant sandbox."""
    walls, cpus = [], []
    async with Codemode(
        config, catalog=Catalog([]), sandboxes=InstantSandboxes(), semantic=False
    ) as engine:
        handle = (await engine.execute("print(1+1)")).session
        for _ in range(rounds):
            samples = []
            cpu_started = time.process_time()
            for _ in range(per_round * 5):
                started = time.perf_counter()
                await engine.execute("print(1+1)", session=handle)
                samples.append(time.perf_counter() - started)
            cpus.append((time.process_time() - cpu_started) * 1e6 / (per_round * 5))
            walls.append(statistics.median(samples) * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def lookup(customer_id: str) -> dict[str, str]:
    """Look up a customer."""
    return {"id": customer_id, "name": "Ada"}


def get_customer(customer_id: str) -> dict[str, str]:
    """Get a customer (not named like a search: no oracle budget to spend in the loop)."""
    return {"id": customer_id, "name": "Ada"}


LOOP_CALLS = 200
LOOP = (
    "import time\nlat = []\n"
    f"for i in range({LOOP_CALLS}):\n"
    "    t = time.perf_counter(); crm.get_customer(customer_id='c1')\n"
    "    lat.append(time.perf_counter() - t)\n"
    "lat.sort(); print(lat[len(lat) // 2] * 1e6)\n"
)


async def per_call_ms(run: Any, n: int, cpu: list[float] | None = None) -> float:
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(n):
        await run()
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) * 1000 / n)
    return (time.perf_counter() - started) * 1000 / n


def digest_ms(rounds: int) -> dict[str, float]:
    """E6: (wall, thread CPU) medians in ms of the two ways to digest a 1 MB argument."""
    # The text of peers.py's P6 (a contact line every 2.4 KB).
    sentence = "Order 4417 shipped to Berlin on 2024-05-02; invoice INV-0142 is due in 30 days, "
    line = (
        sentence + "total 1,240.50 EUR. "
    ) * 24 + "Questions to ops@example.com or +49 30 1234567.\n"
    text = (line * 420)[:1_000_000]
    arguments, key = {"text": text}, b"k" * 32

    def whole() -> str:
        data = json.dumps(
            arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
        ).encode()
        return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()

    assert argument_digest(arguments, key=key) == whole()
    times: dict[str, list[float]] = {"pieces": [], "whole": [], "pieces_cpu": [], "whole_cpu": []}
    for _ in range(max(rounds, 3) * 5):
        for name, run in (
            ("pieces", lambda: argument_digest(arguments, key=key)),
            ("whole", whole),
        ):
            started, cpu = time.perf_counter(), time.thread_time()
            run()
            times[name].append((time.perf_counter() - started) * 1000)
            times[f"{name}_cpu"].append((time.thread_time() - cpu) * 1000)
    return {f"digest_{name}_ms": statistics.median(values) for name, values in times.items()}


async def measure(rounds: int, per_round: int = PER_ROUND) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-engine-") as state:
        return await measure_in(Path(state), rounds, per_round)


async def measure_in(state: Path, rounds: int, per_round: int) -> dict[str, Any]:
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(pool_size=1),
        gateway=GatewaySettings(state_dir=state),
    )
    assert config.privacy.enabled, "the benchmark measures the chain with privacy on"
    catalog = Catalog([PythonConnector("crm", [lookup, get_customer])])
    async with Codemode(config, catalog=catalog, semantic=False) as engine:
        first = await engine.execute("from servers import crm\nprint(1+1)")
        handle = first.session
        assert first.status == "ok", first.render_text()
        assert engine.registry is not None
        sandbox = engine.registry.get(handle, None).sandbox
        if isinstance(sandbox, KeepingSandbox):  # skills and checkpoints wrap the sandbox
            sandbox = sandbox.inner
        assert isinstance(sandbox, SandboxSession) and sandbox.sandbox is not None
        require_isolation(sandbox.sandbox)

        async def engine_print() -> None:
            await engine.execute("print(1+1)", session=handle)

        async def sandbox_print() -> None:
            sandbox.execute("print(1+1)")

        async def engine_call() -> None:
            await engine.execute("crm.lookup(customer_id='c1')", session=handle)

        samples: dict[str, list[float]] = {
            "engine": [],
            "sandbox": [],
            "engine_tool_call": [],
            "call_in_loop_us": [],
        }
        cpu: dict[str, list[float]] = {"engine_cpu": [], "sandbox_cpu": []}
        for _ in range(rounds):  # interleaved, so drift hits all three alike
            samples["engine"].append(await per_call_ms(engine_print, per_round, cpu["engine_cpu"]))
            samples["sandbox"].append(
                await per_call_ms(sandbox_print, per_round, cpu["sandbox_cpu"])
            )
            samples["engine_tool_call"].append(
                await per_call_ms(engine_call, max(per_round // 4, 1))
            )
            loop = await engine.execute(LOOP, session=handle)
            assert loop.status == "ok", loop.render_text()
            samples["call_in_loop_us"].append(float(loop.stdout))
    medians = {
        name: round(statistics.median(values), 3) for name, values in (samples | cpu).items()
    }
    overhead_wall, overhead_cpu = await engine_overhead_us(config, rounds, per_round)
    medians["engine_overhead_us"] = round(overhead_wall, 1)
    medians["engine_overhead_cpu_us"] = round(overhead_cpu, 1)
    medians["engine_over_sandbox"] = round(medians["engine"] / medians["sandbox"], 2)
    medians["engine_cpu_over_sandbox"] = round(medians["engine_cpu"] / medians["sandbox_cpu"], 2)
    medians |= {name: round(value, 3) for name, value in digest_ms(rounds).items()}
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one tiny round: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    numbers = asyncio.run(measure(1, 2) if args.smoke else measure(args.rounds))
    if args.json:
        print(json.dumps(numbers))
        return 0
    print(
        f"E1 engine warm execute print(1+1), privacy on   {numbers['engine']:.3f} ms  (target <= 0.25)"
    )
    print(
        f"E2 sandbox warm execute print(1+1) (baseline)   {numbers['sandbox']:.3f} ms  (target <= 0.2)"
    )
    print(f"   engine / sandbox                              {numbers['engine_over_sandbox']:.2f}x")
    print(
        f"   host CPU per execute: engine {numbers['engine_cpu']:.3f} ms, sandbox "
        f"{numbers['sandbox_cpu']:.3f} ms ({numbers['engine_cpu_over_sandbox']:.2f}x)"
    )
    print(f"E3 engine warm execute with one tool call       {numbers['engine_tool_call']:.3f} ms")
    print(
        f"E5 a tool call from a loop in code, p50           {numbers['call_in_loop_us']:.1f} us"
        f"  ({LOOP_CALLS} calls of a sync Python tool through the chain)"
    )
    print(
        f"E4 the engine's own cost (instant twin sandbox)   p50 {numbers['engine_overhead_us']:.1f} "
        f"us, CPU {numbers['engine_overhead_cpu_us']:.1f} us"
    )
    print(
        f"E6 audit digest of a 1 MB argument              {numbers['digest_pieces_ms']:.2f} ms "
        f"(json.dumps whole: {numbers['digest_whole_ms']:.2f} ms, "
        f"{numbers['digest_pieces_ms'] / numbers['digest_whole_ms']:.2f}x; this thread's CPU "
        f"{numbers['digest_pieces_cpu_ms']:.2f} / {numbers['digest_whole_cpu_ms']:.2f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

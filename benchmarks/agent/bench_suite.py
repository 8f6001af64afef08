"""Running the task suite for both paradigms and printing the ledger.

Each paradigm gets its own world and engine; its tasks run one after another, each set up just
before it runs and checked right after, against the world. With the scripted model the
reference answers are played (exact, repeatable tokens and rounds); with a real model the same
tasks measure success, tokens, rounds and wall time side by side.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_tasks_chains
import bench_tasks_chores
import bench_tasks_crm
import bench_tasks_crm_edits
import bench_tasks_files
import bench_tasks_servers
from bench_task import Task
from bench_world import World

from codemode.agent import (
    Agent,
    Approval,
    ModelProvider,
    RunRecord,
    ScriptedModel,
    ToolCallingAgent,
)

LARGE_CATALOG: list[Task] = [
    *bench_tasks_files.TASKS,
    *bench_tasks_chores.TASKS,
    *bench_tasks_crm.TASKS,
    *bench_tasks_crm_edits.TASKS,
    *bench_tasks_servers.TASKS,
    *bench_tasks_chains.TASKS,
]
# The same tasks with only the servers they need: small catalogs, where tool calling's
# definitions are cheap and codemode has to win on what the model reads (schema reads, errors,
# approvals), not on definitions.
SMALL_CATALOGS: dict[str, tuple[str, ...]] = {
    "time_zones": ("time", "filesystem"),
    "git_changelog": ("git", "filesystem"),
    "delete_small_lost_leads": ("crm",),
    "close_stale_negotiations": ("crm",),
    "wrong_field_name": ("crm", "filesystem"),
    "append_followup_notes": ("crm",),
    "memory_sales_reps": ("crm", "memory"),
    "warehouse_reorder": ("ops",),
    "flaky_rates_tool": ("crm", "ops", "filesystem"),
}
SMALL_SUFFIX = "@small"
TASKS: list[Task] = [
    *LARGE_CATALOG,
    *(
        dataclasses.replace(task, id=task.id + SMALL_SUFFIX, servers=SMALL_CATALOGS[task.id])
        for task in LARGE_CATALOG
        if task.id in SMALL_CATALOGS
    ),
]
PARADIGMS = ("codemode", "tool-calling")
ModelFactory = Callable[[Task, str, World], ModelProvider]


@dataclass
class TaskResult:
    task: str
    paradigm: str
    record: RunRecord
    problem: str | None  # what the checker found wrong; None when the world is right
    seconds: float
    catalog_listed: bool = False  # the agent's prompt listed every function

    @property
    def ok(self) -> bool:
        return self.problem is None and self.record.status == "done"

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "paradigm": self.paradigm,
            "ok": self.ok,
            "problem": self.problem
            or (self.record.error if self.record.status != "done" else None),
            "status": self.record.status,
            "rounds": len(self.record.rounds),
            "tokens_in": self.record.tokens_in,
            "tokens_out": self.record.tokens_out,
            "seconds": round(self.seconds, 3),
        }


def reference_model(task: Task, paradigm: str, world: World) -> ModelProvider:
    steps = task.codemode(world) if paradigm == "codemode" else task.baseline(world)
    if paradigm == "codemode" and world.catalog_listed:
        # The prompt lists every function already: a model writes code at once.
        while steps and isinstance(steps[0], dict) and "search" in steps[0]:
            steps = steps[1:]
    return ScriptedModel(steps, name=f"reference:{task.id}")


def allow_all(approval: Approval) -> bool:
    return True


async def run_paradigm(
    paradigm: str,
    tasks: Sequence[Task],
    root: Path,
    model_for: ModelFactory = reference_model,
    progress: Callable[[str], None] = lambda line: None,
) -> list[TaskResult]:
    """Every task of ``tasks`` for ``paradigm``, one world and engine per catalog."""
    catalogs: dict[tuple[str, ...], list[Task]] = {}
    for task in tasks:
        catalogs.setdefault(task.servers, []).append(task)
    results: list[TaskResult] = []
    for index, (servers, group) in enumerate(catalogs.items()):
        where = root / paradigm / (f"catalog{index}" if servers else "all")
        results += await _run_catalog(paradigm, group, where, servers, model_for, progress)
    return results


async def _run_catalog(
    paradigm: str,
    tasks: Sequence[Task],
    root: Path,
    servers: tuple[str, ...],
    model_for: ModelFactory,
    progress: Callable[[str], None],
) -> list[TaskResult]:
    from codemode.config import load_config
    from codemode.engine import Codemode
    from codemode.sandbox.backends import make_backend
    from codemode.search.listing import small_catalog_listing

    world = World.create(root, servers)
    config = load_config(world.config_path)
    backend = make_backend(config.sandbox, workspace=world.workspace)
    results = []
    async with Codemode(config, backend=backend, semantic=False) as engine:
        world.catalog_listed = small_catalog_listing(engine.catalog.specs()) is not None
        for task in tasks:
            task.setup(world)
            model = model_for(task, paradigm, world)
            agent: Agent | ToolCallingAgent
            if paradigm == "codemode":
                agent = Agent(engine, model, output_format="tools", approve=allow_all)
            else:
                agent = ToolCallingAgent(engine, model, max_rounds=30, approve=allow_all)
            started = time.perf_counter()
            record = await agent.run(task.text(world))
            seconds = time.perf_counter() - started
            await model.aclose()
            result = TaskResult(
                task.id, paradigm, record, task.check(world), seconds, world.catalog_listed
            )
            results.append(result)
            progress(f"{paradigm:>12} {task.id:<28} {'ok' if result.ok else 'FAIL'}")
    return results


def _extra_rounds(by_task: dict[str, dict[str, TaskResult]]) -> dict[str, int]:
    """Per task run by both paradigms: codemode's rounds minus tool calling's."""
    return {
        task: len(pair["codemode"].record.rounds) - len(pair["tool-calling"].record.rounds)
        for task, pair in by_task.items()
        if len(pair) == 2
    }


def median_tokens(results: Sequence[TaskResult]) -> float:
    return statistics.median(r.record.tokens for r in results) if results else 0.0


def ledger(results: Sequence[TaskResult]) -> str:
    by_task: dict[str, dict[str, TaskResult]] = {}
    for r in results:
        by_task.setdefault(r.task, {})[r.paradigm] = r
    head = f"{'task':<32}{'codemode':>28}{'tool calling':>30}{'ratio':>8}"
    sub = f"{'':<32}{'ok rounds':>12}{'tokens':>10}{'s':>6}{'ok rounds':>14}{'tokens':>10}{'s':>6}"
    lines = [head, sub, "-" * len(head)]
    ratios = []
    for task, pair in by_task.items():
        cells = []
        for paradigm in PARADIGMS:
            r = pair.get(paradigm)
            if r is None:
                cells.append(
                    f"{'-':>12}{'-':>10}{'-':>6}"
                    if paradigm == "codemode"
                    else f"{'-':>14}{'-':>10}{'-':>6}"
                )
                continue
            mark = "ok" if r.ok else "FAIL"
            width = 12 if paradigm == "codemode" else 14
            cells.append(
                f"{mark + ' ' + str(len(r.record.rounds)):>{width}}{r.record.tokens:>10,}{r.seconds:>6.1f}"
            )
        ratio = ""
        if len(pair) == 2 and pair["tool-calling"].record.tokens:
            value = pair["codemode"].record.tokens / pair["tool-calling"].record.tokens
            ratios.append(value)
            ratio = f"{value:.1%}"
        lines.append(f"{task:<32}{''.join(cells)}{ratio:>8}")
    lines.append("-" * len(head))
    for paradigm in PARADIGMS:
        mine = [r for r in results if r.paradigm == paradigm]
        if not mine:
            continue
        ok = sum(r.ok for r in mine)
        rounds = statistics.median(len(r.record.rounds) for r in mine)
        wall = sum(r.seconds for r in mine)
        lines.append(
            f"{paradigm:<13} success {ok}/{len(mine)} ({ok / len(mine):.0%}), median tokens "
            f"{median_tokens(mine):,.0f}, median rounds {rounds:g}, total tokens "
            f"{sum(r.record.tokens for r in mine):,}, wall {wall:.1f} s"
        )
    for r in results:
        if not r.ok:
            why = r.problem or f"{r.record.status}: {r.record.error or r.record.summary}"
            lines.append(f"FAIL {r.paradigm} {r.task}: {why}"[:400])
            last = next(
                (s.feedback for rd in reversed(r.record.rounds) for s in rd.steps if s.feedback), ""
            )
            if last:
                lines.append("  last result: " + last.replace("\n", "\n  ")[:800])
    codemode = [r for r in results if r.paradigm == "codemode"]
    baseline = [r for r in results if r.paradigm == "tool-calling"]
    if codemode and baseline:
        share = median_tokens(codemode) / median_tokens(baseline)
        lines.append(
            f"codemode median tokens per task = {share:.1%} of tool calling's (target <= 40%); "
            f"median per-task ratio {statistics.median(ratios):.1%}, worst {max(ratios):.1%} "
            "(target <= 50% on every task)"
        )
        extra = _extra_rounds(by_task)
        lines.append(
            f"rounds beyond tool calling's: worst {max(extra.values()):+d} "
            f"({', '.join(t for t, n in extra.items() if n == max(extra.values()))}; target <= +1)"
        )
    return "\n".join(lines)

"""The agent task suite with its reference answers: every task passes its world checker in both
paradigms (so the harness is right), and codemode's median tokens per task stay under 40% of
the tool-calling baseline's. Needs the third-party MCP servers (`make third-party`)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

SUITE_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "agent"
sys.path.insert(0, str(SUITE_DIR))

import bench_suite  # noqa: E402
from bench_world import missing_servers  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty, pytest.mark.slow]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    import anyio

    missing = missing_servers()
    if missing:
        pytest.fail(f"third-party MCP servers missing ({missing}): run `make third-party`")
    root = tmp_path_factory.mktemp("suite")

    async def run_both():
        found = []
        for paradigm in bench_suite.PARADIGMS:
            found += await bench_suite.run_paradigm(paradigm, bench_suite.TASKS, root)
        return found

    return anyio.run(run_both)


def test_the_suite_is_big_enough_and_has_the_seeds_cases():
    ids = {task.id for task in bench_suite.TASKS}
    assert len(ids) == len(bench_suite.TASKS) >= 30
    assert {"sales_growth", "weekly_report", "transcript_to_crm", "filter_300_leads"} <= ids
    recovery = {t.id for t in bench_suite.LARGE_CATALOG if "recovery" in t.tags}
    assert recovery == {"missing_package", "wrong_field_name", "flaky_rates_tool"}
    small = [t for t in bench_suite.TASKS if t.servers]
    assert {t.id for t in small} == {
        f"{i}{bench_suite.SMALL_SUFFIX}" for i in bench_suite.SMALL_CATALOGS
    }
    assert len(small) >= 8


def test_every_reference_answer_passes_its_world_checker(results):
    failed = [(r.paradigm, r.task, r.problem or r.record.error) for r in results if not r.ok]
    assert failed == []
    assert len(results) == 2 * len(bench_suite.TASKS)


def test_recovery_tasks_recover_after_a_failure(results):
    for r in results:
        if r.paradigm == "codemode" and r.task in (
            "missing_package",
            "wrong_field_name",
            "flaky_rates_tool",
        ):
            statuses = [s.result["status"] for rd in r.record.rounds for s in rd.steps if s.result]
            assert statuses[0] == "error" and statuses[-1] == "ok", (r.task, statuses)


def test_codemode_median_tokens_are_at_most_40_percent_of_tool_calling(results):
    by = {p: [r for r in results if r.paradigm == p] for p in bench_suite.PARADIGMS}
    share = bench_suite.median_tokens(by["codemode"]) / bench_suite.median_tokens(
        by["tool-calling"]
    )
    assert share <= 0.40
    pairs = {r.task: r for r in by["tool-calling"]}
    ratios = [r.record.tokens / pairs[r.task].record.tokens for r in by["codemode"]]
    assert statistics.median(ratios) <= 0.40
    ledger = bench_suite.ledger(results)
    assert "codemode median tokens per task" in ledger and "sales_growth" in ledger


def test_small_catalog_tasks_take_at_most_one_round_more_than_tool_calling(results):
    rounds = {(r.task, r.paradigm): len(r.record.rounds) for r in results}
    small = [t.id for t in bench_suite.TASKS if t.servers]
    extra = {t: rounds[t, "codemode"] - rounds[t, "tool-calling"] for t in small}
    assert max(extra.values()) <= 1, extra
    # A small catalog is listed in the prompt: no search round before the first execution.
    listed = [r for r in results if r.paradigm == "codemode" and r.catalog_listed]
    assert {r.task for r in listed} >= {"time_zones@small", "warehouse_reorder@small"}
    assert all(r.record.rounds[0].steps[0].kind == "execute" for r in listed)
    assert not any(r.catalog_listed for r in results if r.task in bench_suite.SMALL_CATALOGS)

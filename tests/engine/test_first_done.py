"""The engine's wait for the first of an execution and an approval to finish."""

from __future__ import annotations

import asyncio

import pytest

from codemode.engine.progress import first_done, wait_reporting

pytestmark = pytest.mark.anyio


def _future() -> asyncio.Future[object]:
    # The pure-Python future: it shows its callbacks.
    return asyncio.futures._PyFuture(loop=asyncio.get_running_loop())  # type: ignore[attr-defined,no-any-return]


async def test_it_returns_once_one_is_done_and_leaves_no_callback_behind() -> None:
    loop = asyncio.get_running_loop()
    job, attention = _future(), _future()
    loop.call_soon(job.set_result, "done")
    assert await first_done([job, attention], None)
    # Nothing of the wait stays on the future still pending (an approval may come much later).
    assert len(attention._callbacks) == 0  # type: ignore[attr-defined]


async def test_a_timeout_says_nothing_is_done_yet() -> None:
    job = _future()
    assert not await first_done([job], 0.01)
    assert len(job._callbacks) == 0  # type: ignore[attr-defined]
    job.set_result(1)
    assert await first_done([job], 0.01), "already done: no wait"


async def test_progress_is_reported_while_the_job_runs() -> None:
    loop = asyncio.get_running_loop()
    job = loop.create_future()
    reports: list[str] = []

    async def progress(value: float, total: float | None, message: str) -> None:
        reports.append(message)
        if len(reports) == 2:
            job.set_result(None)

    await wait_reporting([job], progress, 0.001, lambda elapsed: (elapsed, None, "running"))
    assert reports == ["running", "running"]

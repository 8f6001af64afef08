"""The approval page (MCP elicitation, URL mode): how fast it loads, and how soon the paused
execution's result reaches the client after the page's decision.

    .venv/bin/python benchmarks/approval_page.py [--rounds N] [--json] [--smoke]

A real HTTP gateway with ``policy.approvals = "url"`` and the demo CRM; the official Python
client declares URL elicitation, in the 2026-07-28 protocol (rounds) and the 2025 one (a
back-channel). Each round: the code reads a lead and pauses before ``crm.update_lead``; the
page is loaded (timed) and approved; the time from posting the decision to the ``execute``
result arriving (the approved call, the rest of the code, the answer) is the resume time.
Targets (issue 27): the page in < 200 ms, resuming within 100 ms. Medians and maxima.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.demo import ACME_LEAD_ID, server_commands
from tests.gateway import conftest as harness

CODE = f"""
from servers import crm
email = crm.get_lead(lead_id='{ACME_LEAD_ID}')['email']
print('about to note', email)
crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': 'to ' + email}})
print('updated')
"""


async def _round(http: Any, mode: str) -> tuple[float, float]:
    from mcp import types

    urls: list[str] = []
    sent = anyio.Event()
    finished: list[float] = []

    async def go(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        urls.append(params.url)
        sent.set()
        return types.ElicitResult(action="accept")

    target = harness.http_target(http.url, harness.bearer(harness.MAIN))
    async with (
        harness.client_for(target, mode=mode, elicitation_callback=go) as client,
        anyio.create_task_group() as group,
        httpx.AsyncClient() as browser,
    ):

        async def call() -> None:
            result = await client.call_tool("execute", {"code": CODE})
            finished.append(time.perf_counter())
            data = result.structured_content or {}
            assert str(data.get("stdout", "")).endswith("updated\n"), result.content

        group.start_soon(call)
        with anyio.fail_after(60):
            await sent.wait()
        started = time.perf_counter()
        page = await browser.get(urls[0])
        loaded = time.perf_counter()
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert page.status_code == 200 and found is not None
        posted = time.perf_counter()
        decided = await browser.post(
            urls[0], data={"csrf": found.group(1), "decision": "allow_call"}
        )
        assert decided.status_code == 200
    return (loaded - started) * 1000, (finished[0] - posted) * 1000


async def _measure(rounds: int) -> dict[str, dict[str, float]]:
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="codemode-bench-page-") as folder:
        root = Path(folder)
        demo = server_commands(root / "data")
        config = harness.write_config(root, {"crm": demo["crm"]}, pool_size=1)
        config.write_text(config.read_text() + '\n[policy]\napprovals = "url"\n')
        http = harness.HTTPGateway(config, root / "gateway.log").start()
        try:
            for mode in ("auto", "legacy"):
                loads, resumes = [], []
                for _ in range(rounds):
                    load, resume = await _round(http, mode)
                    loads.append(load)
                    resumes.append(resume)
                report[mode] = {
                    "page_load_ms_median": round(statistics.median(loads), 1),
                    "page_load_ms_max": round(max(loads), 1),
                    "resume_ms_median": round(statistics.median(resumes), 1),
                    "resume_ms_max": round(max(resumes), 1),
                }
        finally:
            http.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="one round (a check that it runs)")
    args = parser.parse_args()
    report = anyio.run(_measure, 1 if args.smoke else args.rounds)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    names = {"auto": "2026-07-28 (rounds)", "legacy": "2025 (back-channel)"}
    for mode, figures in report.items():
        print(
            f"{names[mode]:22} page {figures['page_load_ms_median']:6.1f} ms median "
            f"({figures['page_load_ms_max']:.1f} max)   resume {figures['resume_ms_median']:6.1f}"
            f" ms median ({figures['resume_ms_max']:.1f} max)"
        )


if __name__ == "__main__":
    main()

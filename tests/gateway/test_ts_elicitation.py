"""The TypeScript SDK client (npm ``@modelcontextprotocol/sdk``) declaring elicitation, against
HTTP gateways: form mode (approve, deny, remember for the tool) and URL mode (the approval
page, loaded and submitted from the client's process). The model-facing result never holds
``approval_required``, and the owner's values stay on the page."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.demo import ACME_LEAD_ID, server_commands

pytestmark = [pytest.mark.thirdparty]

SCRIPT = Path(__file__).with_name("ts_elicit_client.mjs")
RUN_TIMEOUT_S = 120


def update(notes: str, times: int = 1) -> str:
    call = f"crm.update_lead(lead_id='{ACME_LEAD_ID}', fields={{'notes': {notes!r}}})\n"
    return (
        "from servers import crm, ToolError\n"
        "try:\n" + "".join("    " + call for _ in range(times)) + "    print('updated')\n"
        "except ToolError as error:\n"
        "    print('denied:', error)\n"
    )


def _gateway(root: Path, harness: Any, approvals: str) -> Any:
    demo = server_commands(root / "data")
    config = harness.write_config(root, {"crm": demo["crm"]}, pool_size=1)
    config.write_text(
        config.read_text() + f'\n[policy]\napprovals = "{approvals}"\n', encoding="utf-8"
    )
    return harness.HTTPGateway(config, root / "gateway.log").start()


@pytest.fixture(scope="module", params=["auto", "url"])
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, harness: Any
) -> Iterator[Any]:
    http = _gateway(tmp_path_factory.mktemp(f"ts-{request.param}"), harness, request.param)
    http.approvals = request.param
    try:
        yield http
    finally:
        left = http.stop()
        assert not left, f"the gateway left processes behind: {sorted(left)}"


def _run(harness: Any, gateway: Any, decision: str, code: str) -> dict[str, Any]:
    node = harness.NODE_BIN / "node"
    if not node.exists():
        pytest.fail(f"{node} is missing: run `make third-party` first")
    modules = harness.NODE_BIN.parent
    token = harness.TOKENS[harness.MAIN]
    argv = [str(node), str(SCRIPT), str(modules), gateway.url, token, decision, code]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n{gateway.log()}"
    answer: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return answer


def _stdout(out: dict[str, Any]) -> str:
    structured = out["result"]["structuredContent"]
    assert structured["status"] == "ok" and "approval" not in structured, out["result"]
    return str(structured["stdout"])


def test_allowing_runs_the_call_and_the_model_sees_only_the_outcome(
    gateway: Any, harness: Any
) -> None:
    out = _run(harness, gateway, "allow_call", update("from TypeScript"))
    assert _stdout(out) == "updated\n"
    assert [ask["mode"] for ask in out["asked"]] == [
        "url" if gateway.approvals == "url" else "form"
    ]
    if gateway.approvals == "url":
        assert out["page"]["status"] == 200 and out["page"]["decided"] == 200
        assert "from TypeScript" in out["page"]["html"]
    else:
        assert "crm.update_lead" in out["asked"][0]["message"]


def test_denying_keeps_the_call_from_running(gateway: Any, harness: Any) -> None:
    out = _run(harness, gateway, "deny", update("never"))
    assert _stdout(out).startswith("denied:")


def test_allowing_the_tool_asks_once_for_two_calls(gateway: Any, harness: Any) -> None:
    out = _run(harness, gateway, "allow_tool", update("twice", times=2))
    assert _stdout(out) == "updated\n"
    assert len(out["asked"]) == 1

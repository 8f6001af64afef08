"""The official MCP conformance suite against ``codemode serve --transport http``.

The suite (npm ``@modelcontextprotocol/conformance``) needs Node >= 22, which the npm package
``node`` provides in third_party/. It cannot send a bearer token, so this gateway runs with
``--insecure-allow-anonymous`` on loopback. Scenarios that ask for what codemode does not serve
(the suite's reference test tools, resources, prompts) are not expected failures: each is listed
in data/conformance_protocol_errors.yaml with the exact JSON-RPC protocol error it must get, read
from the suite's per-scenario results; every other scenario must pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.thirdparty]

HERE = Path(__file__).parent
PROTOCOL_ERRORS = HERE / "data" / "conformance_protocol_errors.yaml"
# Scenarios that apply to a server of three tools and workspace resources; each must pass.
MUST_PASS = {
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "resources-list",  # the sessions' workspace files
}
RUN_TIMEOUT_S = 300


def test_the_official_conformance_suite_passes(
    tmp_path: Path, fake_server_argv: list[str], harness: Any
) -> None:
    node = harness.NODE_BIN / "node"
    suite = harness.NODE_BIN / "conformance"
    for needed in (node, suite):
        if not needed.exists():
            pytest.fail(f"{needed} is missing: run `make third-party` first")
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True)
    assert int(version.stdout.strip().lstrip("v").split(".")[0]) >= 22, version.stdout

    config = harness.write_config(tmp_path, {"fake": fake_server_argv}, pool_size=1)
    gateway = harness.HTTPGateway(
        config, tmp_path / "gateway.log", extra_args=("--insecure-allow-anonymous",)
    )
    gateway.start()
    results = tmp_path / "results"
    try:
        run = subprocess.run(
            [str(node), str(suite), "server", "--url", gateway.url, "--output-dir", str(results)],
            capture_output=True,
            check=False,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
        )
    finally:
        left = gateway.stop()
    assert not left, f"the gateway left processes behind: {sorted(left)}"
    output = run.stdout + run.stderr
    passed = set(re.findall(r"✓ ([\w-]+): \d+ passed, 0 failed", output))
    assert passed >= MUST_PASS, f"not run or not passed: {MUST_PASS - passed}\n{output[-3000:]}"
    owed: dict[str, str] = yaml.safe_load(PROTOCOL_ERRORS.read_text())["server"]
    checks = _checks_by_scenario(results)
    assert set(owed) <= set(checks), f"not run: {set(owed) - set(checks)}\n{output[-3000:]}"
    wrong = []
    for scenario, found in sorted(checks.items()):
        failed = [c for c in found if c.get("status") in ("FAILURE", "WARNING")]
        if scenario not in owed:
            wrong += [f"{scenario}: {c.get('errorMessage')}" for c in failed]
            continue
        messages = [str(c.get("errorMessage", "")) for c in failed]
        if not messages or not all(owed[scenario] in message for message in messages):
            wrong.append(f"{scenario}: wanted {owed[scenario]!r}, got {messages}")
    assert not wrong, "\n".join(wrong) + f"\n{(tmp_path / 'gateway.log').read_text()[-3000:]}"
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()


def _checks_by_scenario(results: Path) -> dict[str, list[dict[str, Any]]]:
    """The suite's checks of each scenario run (``results/server-<scenario>-<time>/*.json``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in results.glob("server-*/*.json"):
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", path.parent.name.removeprefix("server-"))
        found.setdefault(scenario, []).extend(json.loads(path.read_text()))
    return found

"""The official MCP conformance suite against ``codemode serve --transport http``.

The suite (npm ``@modelcontextprotocol/conformance``) needs Node >= 22, which the npm package
``node`` provides in third_party/. It cannot send a bearer token, so this gateway runs with
``--insecure-allow-anonymous`` on loopback. Scenarios that need the suite's reference test
server are listed as not applicable in data/conformance_not_applicable.yaml; every other one
must pass, and a listed one that passes fails the run.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.thirdparty]

HERE = Path(__file__).parent
NOT_APPLICABLE = HERE / "data" / "conformance_not_applicable.yaml"
# Scenarios that apply to a server of three tools; each must be run and pass.
MUST_PASS = {
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
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
    try:
        run = subprocess.run(
            [
                str(node),
                str(suite),
                "server",
                "--url",
                gateway.url,
                "--expected-failures",
                str(NOT_APPLICABLE),
                "--output-dir",
                str(tmp_path / "results"),
            ],
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
    assert run.returncode == 0, output[-6000:]
    passed = set(re.findall(r"✓ ([\w-]+): \d+ passed, 0 failed", output))
    assert passed >= MUST_PASS, f"not run or not passed: {MUST_PASS - passed}\n{output[-3000:]}"
    assert "Baseline check passed" in output

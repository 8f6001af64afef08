"""The MCP Inspector CLI (a client we did not write) lists and calls the gateway over stdio."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

pytestmark = pytest.mark.thirdparty


@pytest.fixture(scope="module")
def inspector(
    tmp_path_factory: pytest.TempPathFactory, fake_server_argv: list[str], harness: Any
) -> Any:
    """Runs ``mcp-inspector --cli`` against ``codemode serve``; returns its parsed JSON output."""
    command = harness.THIRD_PARTY["inspector"][0]
    if not os.access(command, os.X_OK):
        pytest.fail(f"{command} is missing: run `make third-party` first")
    root = tmp_path_factory.mktemp("inspector")
    config = harness.write_config(root, {"fake": fake_server_argv}, pool_size=1)
    # The gateway's own --config would be taken by the Inspector: give it a servers file.
    servers = root / "inspector.json"
    argv = harness.serve_argv(config)
    servers.write_text(
        json.dumps({"mcpServers": {"codemode": {"command": argv[0], "args": argv[1:]}}})
    )

    def run(*arguments: str) -> Any:
        done = subprocess.run(
            [command, "--cli", "--config", str(servers), "--server", "codemode", *arguments],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, f"inspector failed: {done.stderr[-3000:]}"
        return json.loads(done.stdout)

    yield run
    left = harness.wait_until_gone(harness.pids_whose_cmdline_contains(str(root)))
    assert not left, f"the Inspector left gateway processes behind: {sorted(left)}"


def test_inspector_lists_the_tools(inspector: Any) -> None:
    from codemode.gateway.meta_tools import tool_definitions

    listed = inspector("--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == [t["name"] for t in tool_definitions()]
    execute = next(tool for tool in listed["tools"] if tool["name"] == "execute")
    assert execute["inputSchema"]["required"] == ["code"]
    assert not {"add", "crash"} & {tool["name"] for tool in listed["tools"]}  # upstream tools


def test_inspector_calls_execute(inspector: Any) -> None:
    result = inspector(
        "--method", "tools/call", "--tool-name", "execute", "--tool-arg", "code=print(1+1)"
    )
    assert result["isError"] is False
    assert result["structuredContent"]["stdout"] == "2\n"
    assert result["structuredContent"]["session"].startswith("s_")
    assert "stdout:\n2\n" in result["content"][0]["text"]


def test_inspector_sees_errors_and_upstream_tools(inspector: Any) -> None:
    code = "from servers import fake\nprint(fake.add(a=2, b=3))\n1/0"
    result = inspector(
        "--method", "tools/call", "--tool-name", "execute", "--tool-arg", f"code={code}"
    )
    assert result["isError"] is True
    structured = result["structuredContent"]
    assert structured["stdout"] == "5\n"
    assert structured["error"]["type"] == "ZeroDivisionError" and structured["error"]["line"] == 3

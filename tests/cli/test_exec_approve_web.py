"""``codemode exec --approve web``: the link is printed, the page decides, the code resumes.

A real ``codemode exec`` process; the page is loaded and submitted over HTTP as a browser
would (the browser itself is tested in tests/gateway/test_browser_approval_page.py).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from codemode.demo import server_commands

WAIT_S = 60.0
CODE = (
    "from servers import crm\n"
    "email = crm.get_lead(lead_id='LEAD-0001')['email']\n"
    "print('before', email)\n"
    "crm.update_lead(lead_id='LEAD-0001', fields={'notes': 'to ' + email})\n"
    "print('updated')\n"
)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    command, *args = server_commands(tmp_path / "data")["crm"]
    path = tmp_path / "codemode.toml"
    path.write_text(
        f"[servers.crm]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        "[sandbox]\npool_size = 0\n"
        f'[gateway]\nstate_dir = "{tmp_path / "state"}"\n',
        encoding="utf-8",
    )
    return path


def _link(process: subprocess.Popen[str]) -> tuple[str, str]:
    """The approval link from the process's stderr (a bounded wait), and stderr so far."""
    assert process.stderr is not None
    seen = ""
    deadline = time.monotonic() + WAIT_S
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = process.stderr.readline()
            if not line:
                break
            seen += line
            found = re.search(r"open (http://127\.0\.0\.1:\d+/approve/\S+)", line)
            if found:
                return found.group(1), seen
    process.kill()
    raise AssertionError(f"no approval link within {WAIT_S} s:\n{seen}")


def decide_on_the_page(argv: list[str], decision: str) -> tuple[str, str, str]:
    """Run ``argv`` (a codemode command with --approve web), decide on the page it links;
    returns its stdout, stderr and the page's HTML."""
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        url, _ = _link(process)
        with httpx.Client() as browser:
            page = browser.get(url)
            assert page.status_code == 200 and "crm.update_lead" in page.text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None
            done = browser.post(url, data={"csrf": csrf.group(1), "decision": decision})
            assert done.status_code == 200
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return out, err, page.text


CODEMODE = [sys.executable, "-m", "codemode"]


@pytest.mark.parametrize("decision", ["allow_call", "deny"])
def test_exec_prints_a_link_and_the_page_decides(
    config: Path, tmp_path: Path, decision: str
) -> None:
    code = tmp_path / "code.py"
    code.write_text(CODE, encoding="utf-8")
    argv = [*CODEMODE, "exec", "--json", "--config", str(config), "--approve", "web", str(code)]
    out, err, page = decide_on_the_page(argv, decision)
    email = re.search(r"before (\S+@\S+)", page)
    assert email is not None, page  # the owner's value, on the page
    result = json.loads(out)
    if decision == "allow_call":
        assert result["status"] == "ok" and result["stdout"].endswith("updated\n"), err
    else:
        assert result["status"] == "error" and "denied the approval" in result["error"]["message"]
    # The JSON result (what a model would read) carries the token, not the value.
    assert email.group(1) not in out


def test_run_asks_the_page_for_the_agents_approval(config: Path, tmp_path: Path) -> None:
    steps = [{"execute": CODE}, {"answer": "done"}]
    model = tmp_path / "script.json"
    model.write_text(json.dumps(steps), encoding="utf-8")
    config.write_text(
        config.read_text() + '[agent]\nmodel = "scripted:unused"\nmax_rounds = 3\n',
        encoding="utf-8",
    )
    argv = [*CODEMODE, "run", "--json", "note it", "--config", str(config)]
    argv += ["--model", f"scripted:{model}", "--approve", "web"]
    out, err, page = decide_on_the_page(argv, "allow_call")
    assert re.search(r"to \S+@\S+", page), page  # the argument with the value revealed
    step = json.loads(out)["rounds"][0]["steps"][0]
    assert step["approvals"][0]["allowed"] is True, err
    assert step["result"]["status"] == "ok" and step["result"]["stdout"].endswith("updated\n")

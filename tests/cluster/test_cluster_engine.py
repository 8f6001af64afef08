"""The engine on the remote backend: sandboxes on Ray worker nodes, tools on the gateway."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import codemode as codemode_pkg
from codemode.catalog.catalog import Catalog
from codemode.cluster.provider import RaySandboxes
from codemode.cluster.session import remote_guest
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox.isolation import require_isolation
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import SandboxSettings
from tests.cluster.conftest import Borrowed, LocalRayCluster

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.fixture
def canary() -> str:
    return f"canary-{uuid.uuid4().hex}"


class Billing:
    """An upstream that needs a credential and a private URL: the gateway holds both."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.base_url = f"https://{api_key}.billing.internal"
        self.seen_keys: list[str] = []

    def functions(self) -> list[Any]:
        def charge(amount: int) -> dict[str, Any]:
            """Charge an amount (uses the API key on the gateway)."""
            self.seen_keys.append(self.api_key)
            return {"charged": amount, "receipt": len(self.seen_keys)}

        return [charge]


@dataclass
class Engine:
    codemode: Codemode
    billing: Billing
    sandboxes: Borrowed

    def sandbox_of(self, session: str | None) -> Sandbox:
        found = [s.sandbox for s in self.sandboxes.opened if s.id == session]
        assert found and found[0] is not None, "no remote sandbox for that session"
        return found[0]


@pytest.fixture
async def engine(
    ray_sandboxes: RaySandboxes,
    sandbox_settings: SandboxSettings,
    canary: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> AsyncIterator[Engine]:
    monkeypatch.setenv("BILLING_API_KEY", canary)  # a credential in the environment
    billing = Billing(api_key=canary)
    config = CodemodeConfig(
        servers={}, sandbox=sandbox_settings, gateway=GatewaySettings(state_dir=tmp_path)
    )
    catalog = Catalog([PythonConnector("billing", billing.functions())])
    sandboxes = Borrowed(ray_sandboxes)
    engine = Codemode(config, catalog=catalog, sandboxes=sandboxes, semantic=False, audit=False)
    async with engine:
        yield Engine(engine, billing, sandboxes)


async def test_execute_on_a_worker_keeps_state_and_calls_tools_on_the_gateway(
    engine: Engine, canary: str, ray_cluster: LocalRayCluster
):
    codemode, billing = engine.codemode, engine.billing
    first = await codemode.execute("from servers import billing\nr = billing.charge(amount=5)")
    assert first.status == "ok", first.to_dict()
    second = await codemode.execute("print(r['charged'], r['receipt'])", session=first.session)
    assert (second.status, second.stdout) == ("ok", "5 1\n"), second.to_dict()
    assert billing.seen_keys == [canary]  # the call ran here, with the gateway's credential
    sandbox = engine.sandbox_of(first.session)
    assert remote_guest(sandbox).node in ray_cluster.node_ids()
    assert sandbox.guest_pid is None  # no process of it on the gateway
    report = require_isolation(sandbox)  # proven from inside, on the worker
    assert report.ok and report.isolated_backend


def test_new_sandboxes_go_to_the_least_loaded_node(
    ray_sandboxes: RaySandboxes, ray_cluster: LocalRayCluster
):
    sessions = [ray_sandboxes.open(f"spread-{i}") for i in range(2)]
    try:
        for session in sessions:
            assert session.execute("print(1)").stdout == "1\n"
        nodes = {remote_guest(s.sandbox).node for s in sessions if s.sandbox is not None}
        assert nodes == set(ray_cluster.node_ids()), "both sandboxes landed on one node"
    finally:
        for session in sessions:
            session.close()


def _processes_holding(secret: bytes, pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            blob = Path(f"/proc/{pid}/environ").read_bytes()
            blob += Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if secret in blob:
            found.append(pid)
    return found


def _files_holding(secret: bytes, root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        # The driver's own logs are the gateway's, not a worker's.
        if path.is_file() and not path.is_symlink() and "driver" not in path.name:
            try:
                if secret in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


async def test_no_credential_or_upstream_config_reaches_a_worker_node(
    engine: Engine, canary: str, ray_cluster: LocalRayCluster
):
    codemode, billing = engine.codemode, engine.billing
    result = await codemode.execute(
        "from servers import billing\nprint(billing.charge(amount=1)['charged'])"
    )
    assert result.stdout == "1\n" and billing.seen_keys == [canary]
    secret = canary.encode()
    workers = [node for node in ray_cluster.nodes if node.name != "head"]
    pids = [pid for node in workers for pid in node.pids()]
    assert len(pids) > 4  # raylets, workers, agents and guests were all looked at
    assert _processes_holding(secret, pids) == []
    assert _files_holding(secret, ray_cluster.root) == []
    # The check finds the canary where it is: a process started with the gateway's environment.
    child = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        # Until its exec, /proc shows the environment this process started with (no canary).
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{child.pid}/cmdline").read_bytes().startswith(b"sleep"):
            assert time.monotonic() < deadline, "the control process never started"
            time.sleep(0.01)
        assert _processes_holding(secret, [child.pid]) == [child.pid]
    finally:
        child.kill()
        child.wait(timeout=5)


async def test_a_cluster_address_in_the_config_puts_sandboxes_on_the_cluster(
    ray_cluster: LocalRayCluster, sandbox_settings: SandboxSettings, tmp_path: Path
):
    config = CodemodeConfig(
        servers={},
        sandbox=sandbox_settings,
        cluster=ray_cluster.settings(),
        gateway=GatewaySettings(state_dir=tmp_path),
    )
    async with Codemode(config, catalog=Catalog([]), semantic=False, audit=False) as codemode:
        assert isinstance(codemode.sandboxes, RaySandboxes)
        result = await codemode.execute("import socket\nprint(socket.gethostname())")
        assert (result.status, result.stdout) == ("ok", "sandbox\n"), result.to_dict()


def test_fresh_runs_a_new_interpreter_with_the_files_on_the_same_node(
    ray_sandboxes: RaySandboxes,
):
    session = ray_sandboxes.open("fresh")
    try:
        assert session.execute("open('notes.txt', 'w').write('n')\npatched = True").status == "ok"
        assert session.sandbox is not None
        node = remote_guest(session.sandbox).node
        result = session.execute(
            "print(open('notes.txt').read(), 'patched' in globals())", fresh=True
        )
        assert (result.status, result.stdout) == ("ok", "n False\n"), result.to_dict()
        assert result.files["created"] == []  # carried, not created
        assert session.sandbox is not None and remote_guest(session.sandbox).node == node
    finally:
        session.close()


@pytest.mark.timeout(300)
def test_codemode_exec_reaches_the_cluster_over_ray_client(
    ray_cluster: LocalRayCluster, tmp_path: Path
):
    """``ray://HOST:PORT`` (Ray Client) from a separate gateway process, configured by file."""
    (tmp_path / "codemode.toml").write_text(
        f'[cluster]\naddress = "{ray_cluster.client_address}"\nstream_host = "127.0.0.1"\n'
        '[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "state"\n'
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "codemode", "exec", "-v", "--no-tools", "--json", "-"],
            input=b"import socket\nprint(socket.gethostname(), 6 * 7)",
            check=False,
            cwd=tmp_path,
            capture_output=True,
            timeout=240,  # under the test's own timeout: a hang then shows what the CLI said
            env={**os.environ, "PYTHONPATH": str(Path(codemode_pkg.__file__).parents[1])},
        )
    except subprocess.TimeoutExpired as hung:
        said = (hung.stderr or b"").decode(errors="replace")[-4000:]
        pytest.fail(f"codemode exec over Ray Client did not finish in 240 s; it said:\n{said}")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout)["stdout"] == "sandbox 42\n"


async def test_a_lost_session_resumes_from_its_checkpoint_on_a_new_sandbox(engine: Engine):
    codemode = engine.codemode
    wrote = await codemode.execute(
        "from state import keep\nopen('todo.txt', 'w').write('pears')\ntotals = 3\nkeep('totals')"
    )
    assert wrote.status == "ok", wrote.to_dict()
    guest = remote_guest(engine.sandbox_of(wrote.session))
    guest.link.stream.shutdown(socket.SHUT_RDWR)  # the way to the node is gone
    assert guest.link.wait_ended(10) and guest.lost
    read = "print(open('todo.txt').read(), totals)"
    lost = await codemode.execute(read, session=wrote.session)
    assert lost.status == "session_lost", lost.to_dict()
    resumed = await codemode.execute(read, session=wrote.session)
    assert (resumed.status, resumed.stdout) == ("ok", "pears 3\n"), resumed.to_dict()
    assert resumed.restored.variables == ["totals"]
    assert "resumed from its checkpoint" in resumed.hint

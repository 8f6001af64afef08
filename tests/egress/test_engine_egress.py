"""Through the engine, from a config: the code reaches the listed server, and every connection
is a row of the engine's own audit log (SQLite under the state directory), under the session."""

from __future__ import annotations

from pathlib import Path

import pytest
from egress_servers import Servers, wait_for_events

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings

pytestmark = pytest.mark.anyio


async def test_connections_are_in_the_engines_audit_log(servers: Servers, tmp_path: Path) -> None:
    listed, other = servers.listed.port, servers.other.port
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings.from_mapping(
            {
                "pool_size": 1,
                "network": {"allow": [f"127.0.0.1:{listed}"], "allow_private": ["127.0.0.1/32"]},
            }
        ),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )
    code = f"""
import requests
print(requests.get("http://127.0.0.1:{listed}/via-engine").text)
print(requests.get("http://127.0.0.1:{other}/").status_code)
"""
    async with Codemode(config, catalog=Catalog([]), semantic=False) as engine:
        done = await engine.execute(code)
        assert done.status == "ok", done.render_text()
        assert done.stdout.splitlines() == ["listed GET /via-engine", "403"]
        assert engine.audit_log is not None
        events = wait_for_events(engine.audit_log, 2)
    assert [(e.session, e.decision, e.outcome) for e in events] == [
        (done.session, "allow", "ok"),
        (done.session, "deny", "denied"),
    ]
    assert events[0].message.startswith(f"GET 127.0.0.1:{listed} via 127.0.0.1: sent ")
    assert events[1].error_code == "egress_not_listed"

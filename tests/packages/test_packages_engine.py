"""Packages on demand through the engine: installs reach the code and every one is audited."""

from __future__ import annotations

from pathlib import Path

import pytest
from package_index import Index, build_wheel

from codemode.audit.events import AuditFilter
from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings
from codemode.settings.sandbox import PackageSettings

pytestmark = pytest.mark.anyio


async def test_installs_are_audited_allowed_and_denied(index: Index, tmp_path: Path) -> None:
    build_wheel(index.files, "tinylib", "1.0", "VALUE = 42\n")
    index.add(index.files, "tinylib")
    packages = PackageSettings(
        enabled=True, index_url=index.url, deny=("otherlib",), cache_dir=str(tmp_path / "pk")
    )
    config = CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(packages=packages, pool_size=1),
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
    )
    async with Codemode(config, catalog=Catalog([]), semantic=False) as engine:
        done = await engine.execute("%pip install tinylib\nimport tinylib\nprint(tinylib.VALUE)")
        assert done.status == "ok", done.render_text()
        assert done.stdout.strip().endswith("42")
        refused = await engine.execute("pip install otherlib", session=done.session)
        assert refused.status == "error"
        assert engine.audit_log is not None
        events = engine.audit_log.query(AuditFilter(tool="_packages.*"))
    assert [(e.outcome, e.decision) for e in events] == [("ok", "allow"), ("denied", "deny")]
    assert events[0].message == "installed tinylib==1.0"
    assert events[1].error_code == "package_not_allowed"

"""Config is a leaf: reading a config file loads the settings models, never the runtime of the
packages they configure (no sandbox, agent loop, egress proxy, audit log, engine...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# What config may load: itself, the settings models and the modules everything stands on.
ALLOWED = {"codemode", "codemode.config", "codemode.settings"} | {
    f"codemode.{name}"
    for name in (
        "errors",
        "config_model",
        "tools",
        "hostnames",
        "jsonpointer",
        "terminal_text",
        "heap",
    )
}
# Temporary: ``[privacy]``'s model validates detector names and field paths with privacy's own
# code, so it still loads privacy (and the policy and bridge modules privacy imports). Delete
# this when the privacy settings move to ``codemode.settings.privacy``.
TEMPORARY = {"codemode.privacy", "codemode.policy", "codemode.bridge"}


def loaded_by(statement: str) -> list[str]:
    probe = (
        "import json, sys\n"
        f"{statement}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('codemode'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(SRC)),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    names: list[str] = json.loads(done.stdout)
    return names


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_importing_config_loads_no_package_runtime() -> None:
    loaded = loaded_by("import codemode.config")
    assert "codemode.config.model" in loaded  # the probe did import it
    runtime = [name for name in loaded if package_of(name) not in ALLOWED | TEMPORARY]
    assert not runtime, (
        f"import codemode.config loads {runtime}: config may import only the settings models "
        "(codemode.settings.*) and the modules under them; move a model that sits in a package "
        "into codemode.settings"
    )


def test_the_settings_models_load_nothing_they_configure() -> None:
    for name in ("agent", "audit", "cluster", "egress", "policy", "sandbox", "skills", "state"):
        loaded = loaded_by(f"import codemode.settings.{name}")
        assert [m for m in loaded if package_of(m) not in ALLOWED] == [], name

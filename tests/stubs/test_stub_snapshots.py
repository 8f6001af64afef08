"""Whole-file snapshots of generated stubs for hard schemas.

After an intended change to the generator, refresh the files with
``CODEMODE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/stubs/test_stub_snapshots.py`` and
review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from stub_hard_specs import HARD_SPECS

from codemode.stubs import render_root_init, render_server_init, render_tool_module

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("CODEMODE_UPDATE_SNAPSHOTS") == "1"


def check_snapshot(name: str, source: str) -> None:
    compile(source, name, "exec")
    path = SNAPSHOTS / f"{name}.py.snap"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no snapshot {path}: run with CODEMODE_UPDATE_SNAPSHOTS=1 to create it")
        path.write_text(source, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert source == expected, (
        f"generated source differs from {path}; if intended, rerun with "
        "CODEMODE_UPDATE_SNAPSHOTS=1 and review the diff"
    )


@pytest.mark.parametrize("name", sorted(HARD_SPECS))
def test_tool_module_snapshot(name):
    check_snapshot(f"tool_{name}", render_tool_module(HARD_SPECS[name]))


def test_server_init_snapshot():
    tools = list(HARD_SPECS.values())
    check_snapshot("server_init", render_server_init("mixed", tools))


def test_root_init_snapshot():
    by_server: dict[str, list] = {}
    for spec in HARD_SPECS.values():
        by_server.setdefault(spec.server, []).append(spec)
    check_snapshot("root_init", render_root_init(by_server))

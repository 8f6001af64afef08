"""Stored data only its owner can read: the state and fix stores are created 0600 in 0700
directories whatever the umask, an older store with looser modes is tightened when opened, the
CLI starts with a private umask, and ``codemode doctor`` names anything another user can read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.cli.doctor_checks import check_private_storage
from codemode.config import CodemodeConfig
from codemode.config.model import GatewaySettings
from codemode.memory import KVFixes
from codemode.settings.sandbox import PackageSettings, SandboxSettings
from codemode.state.sqlite import SQLiteStore
from tests.conftest import Program


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The umask most systems default to (0022: files 0644, directories 0755)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_new_state_store_is_private_whatever_the_umask(tmp_path, open_umask):
    path = tmp_path / "state" / "state.sqlite"
    store = SQLiteStore(path)
    store.set("s:1:secret", b'"the value"')
    store.close()
    assert mode(path.parent) == 0o700
    for file in path.parent.iterdir():  # the database and its WAL files
        assert mode(file) == 0o600, file


def test_an_older_store_readable_by_others_is_tightened_when_opened(tmp_path, open_umask):
    folder = tmp_path / "state"
    SQLiteStore(folder / "state.sqlite").close()
    os.chmod(folder, 0o755)
    for file in folder.iterdir():
        os.chmod(file, 0o644)
    SQLiteStore(folder / "state.sqlite").close()
    assert mode(folder) == 0o700
    assert all(mode(file) == 0o600 for file in folder.iterdir())


def test_the_fix_memory_is_private_and_tightened_too(tmp_path, open_umask):
    path = tmp_path / "state" / "state.sqlite"  # the fix memory lives in the state store
    store = SQLiteStore(path)
    KVFixes(store).remember("alice", "sig", "- a\n+ b")
    store.close()
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    os.chmod(path, 0o644)
    SQLiteStore(path).close()
    assert mode(path) == 0o600


def test_the_cli_runs_its_commands_with_a_private_umask(codemode_program: Program) -> None:
    program = (
        "import os, codemode.cli.paths_command as c\n"
        "c.run = lambda args: print(os.umask(0o077)) or 0\n"
        "from codemode.cli.main import main\n"
        "main(['paths'])"
    )
    done = codemode_program(program)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) == 0o077


def config_for(tmp_path: Path) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        gateway=GatewaySettings(state_dir=tmp_path / "state"),
        sandbox=SandboxSettings(packages=PackageSettings(cache_dir=str(tmp_path / "cache"))),
    )


def test_doctor_names_what_other_users_can_read(tmp_path, open_umask):
    config = config_for(tmp_path)
    SQLiteStore(tmp_path / "state" / "state.sqlite").close()
    assert check_private_storage(config).level == "ok"
    approvals = tmp_path / "state" / "approvals"
    approvals.mkdir()
    (approvals / "a1.json").write_text("{}")  # 0644 under this umask
    check = check_private_storage(config)
    assert check.level == "warn" and "a1.json (0644)" in check.detail
    assert "approvals (0755)" in check.detail and "chmod" in check.fix

"""How limits are enforced on this machine, said at start, refused when missing unless accepted
by name; where sandbox cgroups go (a fake cgroup tree stands in for /sys/fs/cgroup)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from codemode.errors import ConfigError, IsolationUnavailableError
from codemode.sandbox import BwrapBackend, Enforcement, SandboxSettings, detect_enforcement
from codemode.sandbox.cgroups import HOST_LEAF, CgroupPlace, find_cgroup_place
from codemode.sandbox.enforcement import rlimit_nproc_applies

pytestmark = pytest.mark.limits

NO_CGROUPS_NO_NPROC = Enforcement(None, nproc_applies=False)


def test_a_limit_nothing_enforces_is_refused_unless_accepted_by_name() -> None:
    assert NO_CGROUPS_NO_NPROC.unenforced == ["processes"]
    with pytest.raises(IsolationUnavailableError) as refused:
        NO_CGROUPS_NO_NPROC.check(())
    message = str(refused.value)
    assert "processes" in message and 'accept_unenforced_limits = ["processes"]' in message.replace(
        "'", '"'
    )
    NO_CGROUPS_NO_NPROC.check(["processes"])  # accepted by name: no error
    assert "NOT ENFORCED" in NO_CGROUPS_NO_NPROC.how["processes"]


def test_an_ordinary_user_without_cgroups_has_every_limit() -> None:
    ordinary = Enforcement(None, nproc_applies=True)
    assert ordinary.unenforced == []
    ordinary.check(())
    assert "RLIMIT_NPROC inside the sandbox's own user namespace" in ordinary.how["processes"]
    assert "every process that ever ran" in ordinary.how["cpu_time"]
    assert "tmpfs" in ordinary.how["memory"]


def test_the_backend_says_how_at_start_and_refuses_what_is_missing(caplog) -> None:
    with pytest.raises(IsolationUnavailableError):
        BwrapBackend(SandboxSettings(pool_size=0), enforcement=NO_CGROUPS_NO_NPROC)
    accepted = SandboxSettings(pool_size=0, accept_unenforced_limits=("processes",))
    with caplog.at_level(logging.INFO, logger="codemode.sandbox.bwrap"):
        backend = BwrapBackend(accepted, enforcement=NO_CGROUPS_NO_NPROC)
    assert backend.enforcement is NO_CGROUPS_NO_NPROC
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'processes' is NOT enforced" in w for w in warnings), warnings
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(line.startswith("sandbox memory:") for line in infos), infos


def test_this_machine_enforces_every_limit() -> None:
    """What `make test` runs on: as root, cgroups; as an ordinary user, RLIMIT_NPROC."""
    found = detect_enforcement()
    assert found.unenforced == []
    if os.geteuid() != 0:
        assert found.cgroups is not None or rlimit_nproc_applies()


def test_the_config_names_accepted_limits() -> None:
    settings = SandboxSettings.from_mapping({"accept_unenforced_limits": ["processes"]})
    assert settings.accept_unenforced_limits == ("processes",)
    with pytest.raises(ConfigError, match="accept_unenforced_limits"):
        SandboxSettings.from_mapping({"accept_unenforced_limits": ["everything"]})


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_cgroup_v2_root_is_used_when_writable(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": "cpu memory pids"},
    )
    _tree(tmp_path, {"codemode/cgroup.subtree_control": ""})
    place = find_cgroup_place(tmp_path, tmp_path / "self-cgroup")
    assert place == CgroupPlace(2, {"v2": tmp_path / "codemode"})
    assert (tmp_path / "codemode" / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"


def test_a_delegated_cgroup_v2_subtree_is_used(tmp_path: Path) -> None:
    """A systemd unit with Delegate=yes: the root offers no pids here, our own cgroup does."""
    own = "user.slice/user-1000.slice/user@1000.service/app.slice/codemode.scope"
    _tree(tmp_path, {"cgroup.controllers": "cpu", "cgroup.subtree_control": ""})
    _tree(tmp_path, {f"{own}/cgroup.controllers": "cpu memory pids"})
    _tree(tmp_path, {f"{own}/cgroup.subtree_control": "", f"{own}/cgroup.procs": ""})
    (tmp_path / "self-cgroup").write_text(f"0::/{own}\n")
    place = find_cgroup_place(tmp_path, tmp_path / "self-cgroup")
    assert place == CgroupPlace(2, {"v2": tmp_path / own}, delegated=True)
    assert "delegated" in place.describe()
    # Started again from inside the leaf this process moves into: the same place.
    (tmp_path / "self-cgroup").write_text(f"0::/{own}/{HOST_LEAF}\n")
    assert find_cgroup_place(tmp_path, tmp_path / "self-cgroup") == place


def test_no_cgroups_for_us(tmp_path: Path) -> None:
    """This machine as an ordinary user sees it: cgroup v1 controllers it may not write (absent
    here) and a cgroup v2 hierarchy without controllers."""
    _tree(tmp_path, {"unified/cgroup.controllers": "", "unified/cgroup.subtree_control": ""})
    (tmp_path / "self-cgroup").write_text("0::/\n")
    assert find_cgroup_place(tmp_path, tmp_path / "self-cgroup") is None

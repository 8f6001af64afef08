"""``codemode skills ...`` over a real state directory (and a real sandbox for ``test``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.cli.main import main
from codemode.skills.model import Skill
from codemode.skills.store import FolderSkills


def _skill(name: str, *, owner: str = "-", tests: str | None = None, shared: bool = False) -> Skill:
    return Skill(
        name=name,
        owner=owner,
        description="Join words with dashes",
        source=f"def {name}(text: str) -> str:\n    return '-'.join(text.split())\n",
        tests=tests or f"from skills import {name}\nassert {name}('a b') == 'a-b'\n",
        signature=f"{name}(text: str) -> str",
        shared=shared,
    )


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "codemode.toml"
    path.write_text('[gateway]\nstate_dir = "state"\n\n[sandbox]\npool_size = 1\n')
    return path


def test_list_show_export_import_approve_and_rm(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FolderSkills(tmp_path / "state" / "skills")
    store.put(_skill("dashes"))
    store.put(_skill("shouted", owner="bob", shared=True))
    config = ["--config", str(config_file)]

    assert main(["skills", "list", *config]) == 0
    assert capsys.readouterr().out == "-/dashes  dashes(text: str) -> str  [not used yet]\n"
    assert main(["skills", "list", "--all", *config]) == 0
    assert "bob/shouted  shouted(text: str) -> str  [not used yet; shared, awaiting approval]" in (
        capsys.readouterr().out
    )
    assert main(["skills", "show", "dashes", *config]) == 0
    assert "return '-'.join(text.split())" in capsys.readouterr().out

    assert main(["skills", "export", "dashes", str(tmp_path / "out"), *config]) == 0
    assert (tmp_path / "out" / "dashes" / "SKILL.md").is_file()
    assert (tmp_path / "out" / "dashes" / "scripts" / "dashes.py").is_file()
    assert (
        main(["skills", "import", str(tmp_path / "out" / "dashes"), "--owner", "carol", *config])
        == 0
    )
    assert store.get("carol", "dashes") is not None

    assert main(["skills", "approve", "bob/shouted", *config]) == 0
    assert store.get("bob", "shouted").approved  # type: ignore[union-attr]
    assert main(["skills", "rm", "dashes", *config]) == 0
    assert store.get("-", "dashes") is None
    assert main(["skills", "show", "dashes", *config]) == 2
    assert "no skill -/dashes" in capsys.readouterr().err


def test_test_reruns_a_skills_tests_in_a_sandbox(
    config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FolderSkills(tmp_path / "state" / "skills")
    store.put(_skill("dashes"))
    store.put(_skill("broken", tests="from skills import broken\nassert broken('a b') == 'ab'\n"))
    assert main(["skills", "test", "dashes", "--config", str(config_file)]) == 0
    assert "-/dashes: tests passed" in capsys.readouterr().out
    assert main(["skills", "test", "broken", "--config", str(config_file)]) == 1
    assert "AssertionError" in capsys.readouterr().out
    assert store.get("-", "broken").last_test.startswith("failed")  # type: ignore[union-attr]

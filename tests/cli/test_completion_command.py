"""`codemode completion`: scripts generated from the parser, exercised in a real bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from codemode.cli.completion import render
from codemode.cli.main import COMMANDS, build_parser, main


def complete_in_bash(script: str, *words: str) -> list[str]:
    """What bash offers for the last word of ``codemode WORDS...``."""
    line = " ".join(["codemode", *words])
    program = (
        f"{script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words)}; _codemode; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", program], check=False, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return sorted(filter(None, done.stdout.splitlines()))


@pytest.fixture(scope="module")
def bash_script() -> str:
    if shutil.which("bash") is None:
        pytest.fail("bash is needed to test the bash completion")
    return render("bash", build_parser())


def test_commands_complete(bash_script):
    assert complete_in_bash(bash_script, "") == sorted(COMMANDS)
    assert complete_in_bash(bash_script, "d") == ["demo", "doctor"]


def test_options_and_their_choices_complete(bash_script):
    assert complete_in_bash(bash_script, "exec", "--appr") == ["--approve"]
    assert complete_in_bash(bash_script, "exec", "--approve", "") == ["all", "ask", "none", "web"]
    assert complete_in_bash(bash_script, "install", "c") == [
        "claude-code",
        "claude-desktop",
        "cursor",
    ]


def test_global_options_before_the_command_are_skipped(bash_script):
    words = ("--log-level", "debug", "-v", "search", "--det")
    assert complete_in_bash(bash_script, *words) == ["--detail"]


def test_zsh_script_wraps_the_bash_one_and_fish_knows_every_command(capsys):
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef codemode\n")
    assert "bashcompinit" in zsh
    assert render("bash", build_parser()) in zsh
    assert main(["completion", "fish"]) == 0
    fish = capsys.readouterr().out
    for name in COMMANDS:
        assert f"-n __fish_use_subcommand -f -a {name} " in fish
    assert "-n '__fish_seen_subcommand_from exec' -l approve -x -a 'ask web all none'" in fish

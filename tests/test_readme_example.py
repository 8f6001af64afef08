"""The README's "Use codemode from Python" example runs as written, as a program of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Use codemode from Python"


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert HEADING in text, f"the README lost its {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section should hold exactly one python example"
    return blocks[0]


def test_the_library_example_runs(tmp_path):
    program = tmp_path / "example.py"
    program.write_text(readme_example(), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run(
        [sys.executable, str(program)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # The search answer names the tool; the streamed output, the result and the session follow.
    assert "crm.add_note(customer: str, text: str) -> dict" in done.stdout
    assert "[stdout] {'customer': 'Acme', 'saved': 6}" in lines
    assert "ok 1" in lines
    assert lines[-1] == "6"

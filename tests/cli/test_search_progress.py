"""The first ``codemode search`` over a set of tools builds the index and shows its stages on
stderr, as ``serve`` does; a later search answers from the stored index without them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def search(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "CODEMODE_CACHE_DIR": str(tmp_path / "cache")}
    env["CODEMODE_STATE_DIR"] = str(tmp_path / "state")
    command = [sys.executable, "-m", "codemode", "search", "send an email", "--no-daemon"]
    return subprocess.run(
        [*command, "--no-semantic", "--limit", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )


def test_the_first_search_shows_the_index_stages_and_the_next_does_not(tmp_path):
    first = search(tmp_path)
    assert first.returncode == 0, first.stderr
    assert "codemode: building the search index over" in first.stderr
    assert "codemode: search index: lexical" in first.stderr
    assert "codemode: search index ready (" in first.stderr
    assert "mail." in first.stdout
    second = search(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "search index" not in second.stderr and second.stdout == first.stdout

"""`--workspace DIR` underneath: a sandbox backend made with a host directory as its workspace.
The code starts in it, the files it writes land there, and they outlive the sandbox."""

from __future__ import annotations

import pytest

from codemode.errors import UsageError
from codemode.sandbox import SandboxPool, SandboxSession, SandboxSettings, make_backend


@pytest.mark.parametrize("unsafe", [False, True], ids=["bwrap", "unsafe-host"])
def test_the_code_starts_in_the_directory_and_its_files_stay(tmp_path, unsafe):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "input.txt").write_text("from the host")
    settings = SandboxSettings(pool_size=0, unsafe_no_isolation=unsafe)
    with SandboxPool(make_backend(settings, workspace=folder), 0) as pool:
        session = SandboxSession(pool, "s")
        result = session.execute(
            "import os\nprint(open('input.txt').read())\n"
            "os.makedirs('out', exist_ok=True)\nopen('out/result.md', 'w').write('# done')"
        )
        session.close()
    assert result.status == "ok", result.error
    assert result.stdout == "from the host\n"
    assert result.files["created"] == ["out/result.md"]
    assert (folder / "out" / "result.md").read_text() == "# done"


def test_a_workspace_that_is_not_a_directory_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="is not a directory"):
        make_backend(SandboxSettings(), workspace=tmp_path / "missing")

"""A process that starts sandboxes raises its soft open-files limit toward the hard one, and
never lowers it."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import resource, sys
from codemode.sandbox.descriptors import raise_open_files_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
got = raise_open_files_limit(wanted=int(sys.argv[1]))
print(got, resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
"""


def run(wanted: int) -> tuple[int, int, int]:
    # In a child: the test process's own limit stays as it was.
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(wanted)], capture_output=True, text=True, check=True
    ).stdout.split()
    got, soft, hard = (int(value) for value in out)
    return got, soft, hard


def test_the_soft_limit_is_raised_as_far_as_the_hard_one_allows() -> None:
    got, soft, hard = run(4096)
    assert got == soft == min(4096, hard)
    assert soft > 256


def test_a_limit_above_the_wanted_one_is_never_lowered() -> None:
    got, soft, _ = run(100)
    assert got == soft == 256

"""The packages a session installed, kept with its checkpoint: a sandbox released while idle
(or lost) comes back with its files, the variables it kept and the packages its code
installed, not with an empty ``sys.path`` where ``import`` fails."""

from __future__ import annotations

from typing import Any

from codemode.bridge.host import PackageProvider
from codemode.checkpoints.tools import CheckpointTools

__all__ = ["RecordedInstalls"]


class RecordedInstalls:
    """A ``PackageProvider`` that tells the session's checkpoint tools of each install that
    succeeded (what the host installed, not what the code claims)."""

    def __init__(self, inner: PackageProvider, checkpoints: CheckpointTools) -> None:
        self.inner = inner
        self.checkpoints = checkpoints

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, Any]:
        value = self.inner.install(requirements, automatic=automatic)
        self.checkpoints.note_installed(requirements)
        return value

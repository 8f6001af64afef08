"""The packages a session installed, kept with its checkpoint and found again by its imports.

A sandbox released while idle (or lost) comes back with its files, the variables it kept and
the packages its code installed (``checkpoints.tools``' restore program installs them again),
not with a ``sys.path`` where ``import`` fails. A new interpreter of the same session
(``fresh=True``) finds them too: its import of a package the session installed before is
answered with that install (from the package store), where an import otherwise installs
only packages the config allows by name.
"""

from __future__ import annotations

from typing import Any

from codemode.bridge.host import PackageProvider
from codemode.checkpoints.tools import CheckpointTools
from codemode.errors import PackageNotAllowedError
from codemode.sandbox.packages import parse_requirement

__all__ = ["RecordedInstalls"]


class RecordedInstalls:
    """A ``PackageProvider`` that tells the session's checkpoint tools of each install that
    succeeded (what the host installed, not what the code claims), and answers an import of
    one of them with the same install."""

    def __init__(self, inner: PackageProvider, checkpoints: CheckpointTools) -> None:
        self.inner = inner
        self.checkpoints = checkpoints

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, Any]:
        if automatic:
            earlier = self._installed_before(requirements)
            if earlier is not None:  # not a guess: the code asked for it in this session
                return self.inner.install(list(earlier), automatic=False)
        value = self.inner.install(requirements, automatic=automatic)
        self.checkpoints.note_installed(requirements)
        return value

    def _installed_before(self, requirements: list[str]) -> tuple[str, ...] | None:
        """The earlier install that named the package an import asks for, if one did."""
        if len(requirements) != 1:
            return None
        try:
            wanted, _ = parse_requirement(requirements[0])
        except PackageNotAllowedError:
            return None
        for names in self.checkpoints.packages:
            for requirement in names:
                try:
                    if parse_requirement(requirement)[0] == wanted:
                        return names
                except PackageNotAllowedError:
                    continue
        return None

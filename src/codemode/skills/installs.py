"""The packages a session installed, kept with its checkpoint and found again by its imports.

A sandbox released while idle (or lost) comes back with its files, the variables it kept and
the packages its code installed (``checkpoints.tools``' restore program installs them again),
not with a ``sys.path`` where ``import`` fails. A new interpreter of the same session
(``fresh=True``) finds them too: its import of a package the session installed before is
answered with that install (from the package store), where an import otherwise installs
only packages the config allows by name. A skill saved from such a session names the ones
its code imports (``imported_installs``), and an import of them by its tests or by a session
that imports the skill is answered the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from codemode.bridge.host import PackageProvider
from codemode.checkpoints.tools import CheckpointTools
from codemode.errors import PackageNotAllowedError
from codemode.sandbox.packages import normalize, parse_requirement
from codemode.skills.analysis import top_level_imports

__all__ = ["RecordedInstalls", "imported_installs"]

Installs = Callable[[], Iterable[tuple[str, ...]]]


class RecordedInstalls:
    """A ``PackageProvider`` that tells the session's checkpoint tools (``record``) of each
    install that succeeded (what the host installed, not what the code claims), and answers
    an import of one of them, or of a package a skill it imported names (``declared``), with
    the same install."""

    def __init__(
        self,
        inner: PackageProvider,
        record: CheckpointTools | None,
        declared: Installs = lambda: (),
    ) -> None:
        self.inner = inner
        self.record = record
        self.declared = declared

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, Any]:
        if automatic:
            earlier = self._known(requirements)
            if earlier is not None:  # not a guess: the code or a skill of it asked for it
                return self.inner.install(list(earlier), automatic=False)
        value = self.inner.install(requirements, automatic=automatic)
        if self.record is not None:
            self.record.note_installed(requirements)
        return value

    def _known(self, requirements: list[str]) -> tuple[str, ...] | None:
        """The install that named the package an import asks for, if one did."""
        if len(requirements) != 1:
            return None
        try:
            wanted, _ = parse_requirement(requirements[0])
        except PackageNotAllowedError:
            return None
        known: list[tuple[str, ...]] = list(self.record.packages) if self.record else []
        known.extend(self.declared())
        for names in known:
            if wanted in _names(names):
                return names
        return None


def imported_installs(code: Iterable[str], installs: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """The requirements of ``installs`` whose package ``code`` imports (at any depth, by its
    top-level name), in order, each once: what a skill saved from the session needs."""
    imported = {normalize(name) for text in code for name in top_level_imports(text)}
    needed: list[str] = []
    for names in installs:
        for requirement in names:
            if _names((requirement,)) & imported and requirement not in needed:
                needed.append(requirement)
    return tuple(needed)


def _names(requirements: Iterable[str]) -> set[str]:
    found = set()
    for requirement in requirements:
        try:
            found.add(parse_requirement(requirement)[0])
        except PackageNotAllowedError:
            continue
    return found

"""The skills a sandbox may import, and the run of a skill's tests before it is saved.

``SkillModules`` serves ``skills`` and ``skills.<name>`` (an owner's skills, plus one being
tested), then whatever the fallback serves (the generated ``servers.*``). ``SkillTester`` runs
a skill's tests in a fresh sandbox of the engine's provider, never the caller's, with the
packages the skill names installed on import.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace

from codemode.bridge.host import ModuleProvider, ModuleSource, PackageProvider, ToolAccess
from codemode.errors import SkillRefusedError
from codemode.sandbox.provider import SandboxProvider
from codemode.skills.guest_code import test_program
from codemode.skills.installs import RecordedInstalls
from codemode.skills.library import SkillLibrary
from codemode.skills.model import Skill

__all__ = ["SkillModules", "SkillTester"]


class SkillModules:
    """A ``ModuleProvider``: ``skills.*`` for one owner (plus skills being tested), then
    ``fallback`` (the generated ``servers.*`` and codemode's own modules)."""

    def __init__(
        self,
        library: SkillLibrary,
        owner: str,
        fallback: ModuleProvider | None,
        *,
        pending: Skill | None = None,
        on_import: Callable[[Skill], None] | None = None,
    ) -> None:
        self.library = library
        self.owner = owner
        self.fallback = fallback
        self.pending = pending
        self.on_import = on_import

    def module_source(self, fullname: str) -> ModuleSource | None:
        if fullname != "skills" and not fullname.startswith("skills."):
            return self.fallback.module_source(fullname) if self.fallback else None
        name = fullname.partition(".")[2]
        if self.pending is not None and name == self.pending.name:
            return ModuleSource(self.pending.source, False, f"skills/{name}.py")
        found, skill = self.library.module_source(self.owner, fullname)
        if skill is not None and self.on_import is not None:
            self.on_import(skill)
        return found


@dataclass
class SkillTester:
    """Runs a skill's tests in a fresh sandbox of the engine's provider (never the caller's)."""

    provider: SandboxProvider
    library: SkillLibrary
    access: Callable[[], ToolAccess]  # the tools and modules the tests may reach
    timeout_s: float
    packages: PackageProvider | None = None  # installs what the skills name, on import

    def run(self, skill: Skill, timeout_s: float | None = None) -> tuple[bool, str]:
        base = self.access()
        modules = SkillModules(self.library, skill.owner, base.modules, pending=skill)
        packages = None
        if self.packages is not None:
            packages = RecordedInstalls(self.packages, None, lambda: self._named(skill))
        sandbox = self.provider.open("t_" + secrets.token_urlsafe(12))
        try:
            result = sandbox.execute(
                test_program(skill.tests, skill.name),
                tools=replace(base, modules=modules, packages=packages),
                timeout_s=min(self.timeout_s, timeout_s or self.timeout_s),
            )
        finally:
            sandbox.close()
        output = (result.stdout + result.stderr).strip()
        if result.status != "ok":
            output = f"{output}\n({result.status}{': ' + result.limit if result.limit else ''})"
        return result.status == "ok", output[-3000:]

    def _named(self, skill: Skill) -> list[tuple[str, ...]]:
        """The packages ``skill`` and the skills it imports name."""
        named = [skill.packages]
        for name in skill.requires:
            try:
                found = self.library.find(skill.owner, name)
            except SkillRefusedError:  # its import fails on its own, and says why
                continue
            if found is not None:
                named.append(found.packages)
        return named

"""Skills and checkpoints for one session, as a wrapper around its sandbox.

``KeepingSandbox`` is a ``SessionSandbox`` around the real one. For each execution it serves
``skills`` and ``skills.<name>`` (this owner's skills first, then the generated ``servers.*``),
routes the ``_skills`` and ``_checkpoint`` built-in servers, counts which skills were used and
whether the execution succeeded, checkpoints the workspace afterwards and restores it before
the first execution after a sandbox was lost (a limit kill, a crash, a gateway restart).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from codemode.bridge.host import NO_TOOLS, ModuleProvider, ModuleSource, ToolAccess, ToolInvoker
from codemode.bridge.router import BuiltinRouter
from codemode.errors import SkillRefusedError, ToolError
from codemode.sandbox.provider import SandboxProvider, SessionSandbox
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback
from codemode.skills.checkpoint import (
    CHECKPOINT_SERVER,
    RESTORE_PROGRAM,
    TAKE_PROGRAM,
    CheckpointTools,
)
from codemode.skills.guest_code import test_program
from codemode.skills.library import SkillLibrary
from codemode.skills.model import Skill
from codemode.tools import ToolCall

__all__ = ["KeepingSandbox", "SkillModules", "SkillTester", "SkillTools", "SKILLS_SERVER"]

SKILLS_SERVER = "_skills"
_TALLY = re.compile(r"(\d+) passed, (\d+) failed")


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

    def run(self, skill: Skill, timeout_s: float | None = None) -> tuple[bool, str]:
        base = self.access()
        modules = SkillModules(self.library, skill.owner, base.modules, pending=skill)
        sandbox = self.provider.open("t_" + secrets.token_urlsafe(12))
        try:
            result = sandbox.execute(
                test_program(skill.tests),
                tools=replace(base, modules=modules),
                timeout_s=min(self.timeout_s, timeout_s or self.timeout_s),
            )
        finally:
            sandbox.close()
        output = (result.stdout + result.stderr).strip()
        if result.status != "ok":
            output = f"{output}\n({result.status}{': ' + result.limit if result.limit else ''})"
        return result.status == "ok", output[-3000:]


class SkillTools:
    """The ``_skills`` server of one session: ``save``."""

    def __init__(
        self, library: SkillLibrary, tester: SkillTester, *, owner: str, session: str
    ) -> None:
        self.library = library
        self.tester = tester
        self.owner = owner
        self.session = session

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if call.tool != "save":
            raise ToolError(f"skills has no operation {call.tool!r}; use save(...)")
        args = call.arguments
        skill = self.library.prepare(
            owner=self.owner,
            session=self.session,
            name=args.get("name"),
            description=args.get("description"),
            source=args.get("source"),
            tests=args.get("tests"),
            shared=args.get("shared") is True,
        )
        passed, output = self.tester.run(skill, max(timeout_s - 1.0, 1.0))
        if not passed:
            raise SkillRefusedError(
                f"the tests of skill {skill.name!r} failed, so it was not saved:\n{output}",
                fix="fix the function or its tests and save again",
            )
        tally = _TALLY.search(output)
        ran = "tests passed"
        if tally and int(tally.group(1)):
            ran = f"{tally.group(1)} test(s) passed"
        self.library.store.put(skill)
        summary = f"saved skill {skill.name} ({ran}); `from skills import {skill.name}`"
        return {"summary": summary, "tools": list(skill.tools)}


class KeepingSandbox:
    """A ``SessionSandbox`` with skills, usage counts and checkpoints (see the module doc)."""

    def __init__(
        self,
        inner: SessionSandbox,
        *,
        owner: str,
        library: SkillLibrary | None,
        skill_tools: ToolInvoker | None,
        checkpoints: CheckpointTools | None,
        workspace: str,
        restore: bool = False,
    ) -> None:
        self.inner = inner
        self.owner = owner
        self.library = library
        self.skill_tools = skill_tools
        self.checkpoints = checkpoints
        self.workspace = workspace
        self._restore_pending = restore and checkpoints is not None
        self._loaded: dict[str, Skill] = {}

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        fresh: bool = False,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        restored = self._restore(timeout_s) if self._restore_pending else None
        if fresh:
            self._loaded.clear()
        imported: dict[str, Skill] = {}
        result = self.inner.execute(
            code,
            tools=self._access(tools, imported),
            fresh=fresh,
            timeout_s=timeout_s,
            on_output=on_output,
            cancel=cancel,
        )
        self._count(code, imported, result)
        if result.sandbox_reset:
            self._loaded.clear()
            self._restore_pending = self.checkpoints is not None
        elif self.checkpoints is not None and self._worth_keeping(result):
            note = self._take()
            if note is not None and note.startswith("not saved"):
                result.extra["checkpoint"] = note
        if restored is not None:
            result.extra["restored"] = restored
            what = f"{len(restored['files'])} file(s)"
            if restored["variables"]:
                what += " and variables " + ", ".join(restored["variables"])
            result.hint = (
                f"The sandbox was lost earlier; this session resumed from its checkpoint "
                f"({what} restored). {result.hint}"
            ).strip()
        return result

    def live_counts(self) -> tuple[int, int]:
        return self.inner.live_counts()

    def _access(self, tools: ToolAccess, imported: dict[str, Skill]) -> ToolAccess:
        builtins: dict[str, ToolInvoker] = {}
        modules = tools.modules
        if self.library is not None and self.skill_tools is not None:
            builtins[SKILLS_SERVER] = self.skill_tools

            def note(skill: Skill) -> None:
                imported[skill.name] = skill

            modules = SkillModules(self.library, self.owner, tools.modules, on_import=note)
        if self.checkpoints is not None:
            builtins[CHECKPOINT_SERVER] = self.checkpoints
        if not builtins:
            return tools
        grant = tools.grant
        router = BuiltinRouter(tools.invoker, builtins)
        return ToolAccess(
            router,
            modules,
            lambda s, t: s in builtins or grant(s, t),
            tools.on_refused,
            packages=tools.packages,
        )

    def _count(self, code: str, imported: dict[str, Skill], result: ExecutionResult) -> None:
        if self.library is None:
            return
        usage = self.library.usage
        for skill in imported.values():
            usage.imported(skill)
        used = dict(imported)
        for name, skill in self._loaded.items():
            if name not in used and re.search(rf"\b{re.escape(name)}\b", code):
                used[name] = skill
        ok = result.status == "ok"
        for skill in used.values():
            usage.ran(skill, ok)
        self._loaded.update(imported)

    def _worth_keeping(self, result: ExecutionResult) -> bool:
        assert self.checkpoints is not None
        changed = any(result.files.get(kind) for kind in ("created", "modified", "deleted"))
        return changed or bool(self.checkpoints.kept)

    def _take(self) -> str | None:
        """Checkpoint the workspace and kept variables; what happened, in a few words."""
        tools = self.checkpoints
        assert tools is not None
        tools.note = None
        program = TAKE_PROGRAM.format(
            root=self.workspace,
            names=sorted(tools.kept),
            limit=tools.max_bytes,
            max_files=tools.max_files,
        )
        only = ToolAccess(tools, None, lambda s, t: s == CHECKPOINT_SERVER)
        taken = self.inner.execute(program, tools=only, timeout_s=30.0)
        if taken.sandbox_reset:
            self._restore_pending = True
        return tools.note if taken.status == "ok" else f"not saved: {taken.status}"

    def _restore(self, timeout_s: float | None) -> dict[str, Any] | None:
        tools = self.checkpoints
        assert tools is not None
        self._restore_pending = False
        tools.reset_restore()
        only = ToolAccess(tools, None, lambda s, t: s == CHECKPOINT_SERVER)
        result = self.inner.execute(
            RESTORE_PROGRAM.format(root=self.workspace), tools=only, timeout_s=timeout_s
        )
        fetched = tools.fetched
        if fetched is None or result.status != "ok":
            return None
        described = fetched.describe()
        described["variables"] = sorted(tools.restored_variables)
        # Restored variables stay kept: the next checkpoint (maybe on another replica) has them.
        tools.kept |= set(tools.restored_variables)
        return described

    def close(self) -> None:
        self.inner.close()

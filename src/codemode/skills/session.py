"""Skills and checkpoints for one session, as a wrapper around its sandbox.

``KeepingSandbox`` is a ``SessionSandbox`` around the real one. For each execution it serves
``skills`` and ``skills.<name>`` (this owner's skills first, then the generated ``servers.*``),
routes the ``_skills`` and ``_checkpoint`` built-in servers, counts which skills were used and
whether the execution succeeded, checkpoints the workspace afterwards and restores it before
the first execution after a sandbox was lost (a limit kill, a crash, a gateway restart).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

from codemode.bridge.host import (
    NO_TOOLS,
    ToolAccess,
    ToolInvoker,
)
from codemode.bridge.router import BuiltinRouter
from codemode.checkpoints import (
    CHECKPOINT_SERVER,
    RESTORE_PROGRAM,
    TAKE_PROGRAM,
    CheckpointTools,
)
from codemode.errors import SkillRefusedError, ToolError
from codemode.sandbox.provider import SessionSandbox
from codemode.sandbox.reports import Restore
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import OutputCallback
from codemode.sandbox.session import LOST_BEFORE_HINT
from codemode.skills.installs import RecordedInstalls, imported_installs
from codemode.skills.library import SkillLibrary
from codemode.skills.model import Skill
from codemode.skills.tester import SkillModules, SkillTester
from codemode.tools import ToolCall

__all__ = ["SKILLS_SERVER", "KeepingSandbox", "SkillTools", "describe_restore"]

SKILLS_SERVER = "_skills"
_TALLY = re.compile(r"(\d+) passed, (\d+) failed")


class SkillTools:
    """The ``_skills`` server of one session: ``save``."""

    def __init__(
        self,
        library: SkillLibrary,
        tester: SkillTester,
        *,
        owner: str,
        session: str,
        installed: Callable[[], Iterable[tuple[str, ...]]] = lambda: (),
    ) -> None:
        self.library = library
        self.tester = tester
        self.owner = owner
        self.session = session
        self.installed = installed  # the session's installs: a skill names those it imports

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
        named = imported_installs((skill.source, skill.tests), self.installed())
        skill = skill.with_changes(packages=named)
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
        # One execution or release at a time: a release never stops a running execution,
        # and an execution that arrives during a release waits for it, then restores.
        self._lock = threading.Lock()
        # Changed since the last checkpoint (or not known to match it).
        self._dirty = False
        # Its files changed since the last checkpoint (or may have): the next one archives
        # them; otherwise it keeps the stored archive and takes the variables and folder.
        self._files_changed = True
        self._released = False
        # A sandbox may be running for this session (it ran something and was not lost).
        self._live = False
        # Its checkpoint could not be saved since the last execution: it keeps its sandbox.
        self._unsaved = False
        # The skills the running execution imported (``_access`` notes them).
        self._imported: dict[str, Skill] = {}
        # The last tools ``_access`` wrapped, and what it made of them: a session's executions
        # mostly reach the same tools, and the wrapping costs more than the rest of its work.
        self._wrapped: tuple[ToolAccess, ToolAccess] | None = None

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
        with self._lock:
            return self._execute(
                code,
                tools=tools,
                fresh=fresh,
                timeout_s=timeout_s,
                on_output=on_output,
                cancel=cancel,
            )

    def _execute(
        self,
        code: str,
        *,
        tools: ToolAccess,
        fresh: bool,
        timeout_s: float | None,
        on_output: OutputCallback | None,
        cancel: threading.Event | None,
    ) -> ExecutionResult:
        lost = self._live and self.checkpoints is not None and self.inner.lost()
        if lost:
            # Ended unasked since the last execution (killed from outside): its checkpoint
            # goes into the new sandbox first, as after a release.
            self._restore_pending = True
        restored = self._restore(timeout_s, tools) if self._restore_pending else None
        if fresh:
            self._loaded.clear()
        elif self._loaded and self._skills_changed():
            # The guest keeps what it imported: a new wrapping is a change of modules for the
            # runner, which has the guest let go of them (``ModuleWatch``).
            self._loaded.clear()
            self._wrapped = None
        imported = self._imported = {}
        result = self.inner.execute(
            code,
            tools=self._access(tools),
            fresh=fresh,
            timeout_s=timeout_s,
            on_output=on_output,
            cancel=cancel,
        )
        self._count(code, imported, result)
        self._live, self._unsaved = not result.sandbox_reset, False
        unsaved: str | None = None
        changed = any(result.files.get(kind) for kind in ("created", "modified", "deleted"))
        if changed or result.status not in ("ok", "error"):  # stopped: its list may be short
            self._files_changed = True
        if result.sandbox_reset:
            self._loaded.clear()
            self._restore_pending = self.checkpoints is not None
            self._dirty = False
        elif self.checkpoints is not None and self._worth_keeping(changed):
            note = self._take()
            if note is not None and note.startswith("not saved"):
                unsaved = note
        else:
            # The code may have moved to another folder: a release checkpoints again (its
            # files archived again only if they changed).
            self._dirty = True
        if restored is None:
            if lost:  # and no checkpoint to resume from: said plainly all the same
                hint = f"{LOST_BEFORE_HINT} {result.hint}".strip()
                return replace(result, checkpoint=unsaved, sandbox_reset=True, hint=hint)
            # Mostly nothing to note: a copy of the thirty fields costs more than the rest here.
            return result if unsaved == result.checkpoint else replace(result, checkpoint=unsaved)
        hint = f"{describe_restore(restored)} {result.hint}".strip()
        return replace(result, checkpoint=unsaved, restored=restored, hint=hint)

    @property
    def released(self) -> bool:
        """Released while idle: the next execution restores the checkpoint."""
        return self._released

    def release(self, still_idle: Callable[[], bool] = lambda: True) -> bool:
        """Checkpoint the session (if it changed since the last checkpoint) and stop its
        sandbox; the next execution restores it. False, and nothing stopped, when an
        execution is running, ``still_idle()`` says no, or the checkpoint could not be saved
        (what is not saved would be lost)."""
        if self.checkpoints is None or not self._lock.acquire(blocking=False):
            return False
        try:
            if not self._live or self._restore_pending or self._unsaved or not still_idle():
                return False
            # Unchanged since its checkpoint: that one is kept as long as the session is.
            if self._dirty or not self.checkpoints.refresh():
                note = self._take()
                if note is None or not note.startswith("saved"):
                    self._unsaved = True  # not tried again until the code runs again
                    return False
            if not self.inner.release(still_idle):
                return False
            self._loaded.clear()
            self._restore_pending = self._released = True
            self._live = False
            return True
        finally:
            self._lock.release()

    def lost(self) -> bool:
        return self.inner.lost()

    def live_counts(self) -> tuple[int, int]:
        return self.inner.live_counts()

    def live_stdout(self) -> str:
        return self.inner.live_stdout()

    def _access(self, tools: ToolAccess) -> ToolAccess:
        """``tools`` with the skills' modules and codemode's own servers (the same object as
        the last time for the same ``tools``)."""
        wrapped = self._wrapped
        if wrapped is not None and wrapped[0] is tools:
            return wrapped[1]
        builtins: dict[str, ToolInvoker] = {}
        modules = tools.modules
        if self.library is not None and self.skill_tools is not None:
            builtins[SKILLS_SERVER] = self.skill_tools

            def note(skill: Skill) -> None:
                self._imported[skill.name] = skill

            modules = SkillModules(self.library, self.owner, tools.modules, on_import=note)
        if self.checkpoints is not None:
            builtins[CHECKPOINT_SERVER] = self.checkpoints
        access = tools
        if builtins:
            grant = tools.grant
            packages = tools.packages
            if packages is not None:
                packages = RecordedInstalls(packages, self.checkpoints, self._named_by_skills)
            access = ToolAccess(
                BuiltinRouter(tools.invoker, builtins),
                modules,
                lambda s, t: s in builtins or grant(s, t),
                tools.on_refused,
                packages=packages,
            )
        self._wrapped = (tools, access)
        return access

    def _named_by_skills(self) -> list[tuple[str, ...]]:
        """The packages the skills this sandbox imported name (their imports install them)."""
        skills = (*self._loaded.values(), *self._imported.values())
        return [skill.packages for skill in skills if skill.packages]

    def _skills_changed(self) -> bool:
        """Whether a skill the sandbox imported was saved again, deleted, or is now shadowed
        by the owner's own of the same name, since it was imported."""
        if self.library is None:
            return False
        store = self.library.store
        for name, skill in self._loaded.items():
            current = store.get(self.owner, name)
            if current is None and skill.owner != self.owner:
                current = store.get(skill.owner, name)
            if current is None or current.source != skill.source:
                return True
        return False

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

    def _worth_keeping(self, files_changed: bool) -> bool:
        assert self.checkpoints is not None
        return files_changed or bool(self.checkpoints.kept) or self.checkpoints.packages_changed

    def _take(self) -> str | None:
        """Checkpoint the workspace and kept variables; what happened, in a few words."""
        tools = self.checkpoints
        assert tools is not None
        tools.note = None
        # Files unchanged since a checkpoint that is still stored: it keeps their archive.
        archive = self._files_changed or not tools.refresh()
        program = TAKE_PROGRAM.format(
            root=self.workspace,
            names=sorted(tools.kept),
            limit=tools.max_bytes,
            max_files=tools.max_files,
            archive=archive,
        )
        only = ToolAccess(tools, None, lambda s, t: s == CHECKPOINT_SERVER)
        taken = self.inner.execute(program, tools=only, timeout_s=30.0)
        if taken.sandbox_reset:
            self._restore_pending, self._live = True, False
        note = tools.note if taken.status == "ok" else f"not saved: {taken.status}"
        self._dirty = note is None or not note.startswith("saved")
        self._files_changed = self._files_changed and self._dirty
        return note

    def _restore(self, timeout_s: float | None, access: ToolAccess) -> Restore | None:
        """Restore the checkpoint into the new sandbox; the session's packages are installed
        again through ``access``'s installer (its checks, its audit)."""
        tools = self.checkpoints
        assert tools is not None
        self._restore_pending = False
        tools.reset_restore()
        only = ToolAccess(
            tools, None, lambda s, t: s == CHECKPOINT_SERVER, packages=access.packages
        )
        result = self.inner.execute(
            RESTORE_PROGRAM.format(root=self.workspace), tools=only, timeout_s=timeout_s
        )
        released, self._released = self._released, False
        fetched = tools.fetched
        reason: Literal["idle", "lost"] = "idle" if released else "lost"
        if result.status != "ok":
            if tools.unreadable is not None:  # said plainly, whatever the reason for the restore
                error = f"its checkpoint could not be read: {tools.unreadable}"
                return Restore([], [], reason, error=error)
            if not released:
                return None
            # Said plainly: the code must not go on as if its files were there.
            error = f"the checkpoint could not be restored ({result.status})"
            return Restore([], [], reason, error=error)
        if fetched is None and not released:
            return None
        # Restored variables stay kept: the next checkpoint (maybe on another replica) has them.
        tools.kept |= set(tools.restored_variables)
        self._dirty = False
        self._files_changed = fetched is None  # else they are the stored archive's
        return Restore(
            list(fetched.files) if fetched is not None else [],
            sorted(tools.restored_variables),
            reason,
            taken_at=fetched.taken_at if fetched is not None else None,
            packages=tools.restored_packages,
        )

    def close(self) -> None:
        self.inner.close()


def describe_restore(restored: Restore) -> str:
    """The result's line about a restore."""
    what = f"{len(restored.files)} file(s)"
    if restored.variables:
        what += " and variables " + ", ".join(restored.variables)
    if restored.error is not None:
        why = (
            "This session was idle, so its sandbox was released"
            if restored.reason == "idle"
            else "This session continues in a new sandbox"
        )
        return f"{why}, and {restored.error}: its files and variables start empty."
    packages = ""
    if restored.packages:
        packages = " Packages it had installed were installed again: " + ", ".join(
            restored.packages
        )
        packages += "."
    if restored.reason == "idle":
        return (
            f"This session was idle, so its sandbox was released; it resumed from its "
            f"checkpoint ({what} restored; other variables start empty: name the ones to "
            f"keep with `from state import keep`).{packages}"
        )
    lost = "The sandbox was lost earlier; this session resumed from its checkpoint"
    return f"{lost} ({what} restored).{packages}"

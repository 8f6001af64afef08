"""What the engine holds for skills and checkpoints, and the few calls it makes.

runtime = SkillsRuntime.open(config, state_store, provider, access, test_invoker, isolated)
sandbox = runtime.wrap(provider.open(handle), handle, owner, chain.invoker, restore=False)
runtime.search(owner, query)      # skills next to the tools, with their track record
runtime.resumable(handle, owner)  # a checkpoint of this owner's session exists
runtime.saved(handle, owner)      # that checkpoint (a released session's files)
runtime.forget(handle)            # the session closed or expired: drop its checkpoint
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemode.bridge.host import PackageProvider, ToolAccess, ToolInvoker
from codemode.checkpoints import (
    Checkpoint,
    CheckpointStore,
    CheckpointTools,
    KVCheckpoints,
)
from codemode.sandbox.layout import WORKSPACE
from codemode.sandbox.provider import SandboxProvider, SessionSandbox
from codemode.skills.library import SkillHit, SkillLibrary
from codemode.skills.model import Skill
from codemode.skills.session import KeepingSandbox, SkillTools
from codemode.skills.store import FolderSkills, owner_key
from codemode.skills.tester import SkillTester
from codemode.skills.usage import SkillUsage
from codemode.state.store import KeyValueStore
from codemode.state.tiered import TieredStore
from codemode.tools import ToolSpec

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig

__all__ = ["SkillsRuntime", "render_skill_hits"]


@dataclass
class SkillsRuntime:
    config: CodemodeConfig
    library: SkillLibrary | None
    checkpoints: CheckpointStore | None
    provider: SandboxProvider
    access: Callable[[ToolInvoker], ToolAccess]
    test_invoker: ToolInvoker
    # The catalog's version: staleness is checked again only when it changed.
    version: Callable[[], int] = lambda: 0
    # Installs what a skill's tests import of the packages it names (None: packages off).
    test_packages: PackageProvider | None = None
    _checked: int | None = None

    @classmethod
    def open(
        cls,
        config: CodemodeConfig,
        state: TieredStore,
        provider: SandboxProvider,
        access: Callable[[ToolInvoker], ToolAccess],
        test_invoker: ToolInvoker,
        *,
        isolated: bool,
        checkpoints: KeyValueStore | None = None,
        specs: Callable[[], list[ToolSpec]],
        version: Callable[[], int],
        test_packages: PackageProvider | None = None,
    ) -> SkillsRuntime:
        settings = config.skills
        library = None
        if settings.enabled:
            store = FolderSkills(config.gateway.state_dir / "skills")
            library = SkillLibrary(store, SkillUsage(state), settings, specs)
        # Checkpoints go to the durable tier (or ``checkpoints``, a store every gateway replica
        # shares); only a real sandbox has a workspace to keep.
        kept = None
        if settings.checkpoints and isolated:
            kept = KVCheckpoints(checkpoints if checkpoints is not None else state.durable)
        return cls(config, library, kept, provider, access, test_invoker, version, test_packages)

    def tester(self, invoker: ToolInvoker) -> SkillTester:
        assert self.library is not None
        return SkillTester(
            self.provider,
            self.library,
            lambda: self.access(invoker),
            self.config.skills.test_timeout_s,
            self.test_packages,
        )

    def wrap(
        self,
        sandbox: SessionSandbox,
        handle: str,
        owner: str | None,
        invoker: ToolInvoker,
        *,
        restore: bool,
    ) -> KeepingSandbox:
        who = owner_key(owner)
        settings = self.config.skills
        checkpoints = None
        if self.checkpoints is not None:
            checkpoints = CheckpointTools(
                self.checkpoints,
                handle=handle,
                owner=who,
                max_bytes=settings.max_checkpoint_bytes,
                max_files=settings.max_checkpoint_files,
                ttl_s=self.config.gateway.session_idle_timeout_s,
            )
        skill_tools = None
        if self.library is not None:
            kept = checkpoints
            skill_tools = SkillTools(
                self.library,
                self.tester(invoker),
                owner=who,
                session=handle,
                installed=lambda: kept.packages if kept is not None else (),
            )
        return KeepingSandbox(
            sandbox,
            owner=who,
            library=self.library,
            skill_tools=skill_tools,
            checkpoints=checkpoints,
            workspace=WORKSPACE,
            restore=restore,
        )

    def resumable(self, handle: str, owner: str | None) -> bool:
        return self.saved(handle, owner) is not None

    def saved(self, handle: str, owner: str | None) -> Checkpoint | None:
        """The checkpoint of ``owner``'s session, if there is one."""
        found = self.checkpoints.get(handle) if self.checkpoints is not None else None
        return found if found is not None and found.owner == owner_key(owner) else None

    def forget(self, handle: str) -> None:
        if self.checkpoints is not None:
            self.checkpoints.delete(handle)

    def check_stale(self) -> list[Skill]:
        """Mark the skills whose tools changed since the catalog was last checked."""
        version = self.version()
        if self.library is None or version == self._checked:
            return []
        self._checked = version
        tester = self.tester(self.test_invoker)
        return self.library.check_stale(tester.run)

    def search(self, owner: str | None, query: str, limit: int = 3) -> list[SkillHit]:
        if self.library is None:
            return []
        self.check_stale()
        return self.library.search(owner_key(owner), query, limit)


def render_skill_hits(hits: list[SkillHit]) -> str:
    if not hits:
        return ""
    lines = ["", "Saved skills (`from skills import NAME`; tested code from earlier tasks):"]
    lines += [hit.render() for hit in hits]
    return "\n".join(lines)

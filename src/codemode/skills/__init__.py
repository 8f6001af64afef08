"""Skills: the agent's own working code, saved with its tests and imported in later tasks.

Inside the sandbox: ``from skills import save`` and ``from skills import <name>``. On the host:
``SkillLibrary`` (visibility, saving, staleness, search) over a ``SkillStore`` (folders in the
Agent Skills layout by default) and usage counts in the state store. ``KeepingSandbox`` also
carries the session checkpoints (``codemode.checkpoints``), so a session survives a lost
sandbox.
"""

from codemode.settings.skills import SkillsSettings
from codemode.skills.model import Skill

__all__ = ["Skill", "SkillsSettings"]

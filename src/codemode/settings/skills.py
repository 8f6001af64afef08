"""``[skills]``: saved skills, the approval gate for shared ones, and session checkpoints."""

from __future__ import annotations

from codemode.config_model import ConfigModel, PositiveNumber, PositiveWholeNumber

__all__ = ["SkillsSettings"]


class SkillsSettings(ConfigModel):
    """A skill saved with ``shared=True`` is importable by other owners only once a person
    approves it (``codemode skills approve OWNER/NAME``) unless ``shared_need_approval`` is
    false. Checkpoints keep a session's files (and the variables it asks to keep) so it can
    resume after a limit kill, a crash or a gateway restart."""

    enabled: bool = True
    shared_need_approval: bool = True
    test_timeout_s: PositiveNumber = 30.0
    max_source_bytes: PositiveWholeNumber = 64 * 1024
    checkpoints: bool = True
    max_checkpoint_bytes: PositiveWholeNumber = 8 * 1024 * 1024
    max_checkpoint_files: PositiveWholeNumber = 2000

"""Session checkpoints: a session's files (and the variables it keeps) in the durable tier.

They let an idle session release its sandbox (``engine/idle.py``), a restarted gateway pick a
session up again and another replica resume it. ``store`` keeps them; ``tools`` takes and
restores them through the sandbox (the host never reads the workspace).
"""

from codemode.checkpoints.store import Checkpoint, CheckpointStore, KVCheckpoints
from codemode.checkpoints.tools import (
    CHECKPOINT_SERVER,
    RESTORE_PROGRAM,
    TAKE_PROGRAM,
    CheckpointTools,
    archive_entries,
    archive_file,
)

__all__ = [
    "CHECKPOINT_SERVER",
    "RESTORE_PROGRAM",
    "TAKE_PROGRAM",
    "Checkpoint",
    "CheckpointStore",
    "CheckpointTools",
    "KVCheckpoints",
    "archive_entries",
    "archive_file",
]

"""The gateway's audit log in its state directory, with the key that digests arguments."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from codemode.audit.sqlite import SQLiteAuditLog
from codemode.settings.audit import AuditSettings

__all__ = ["open_audit_log"]


def open_audit_log(state_dir: Path, rotation: AuditSettings) -> tuple[SQLiteAuditLog, bytes]:
    """``state_dir/audit.sqlite`` and the secret key (made once, mode 0600) for digests."""
    state_dir.mkdir(parents=True, exist_ok=True)
    key_file = state_dir / "audit.key"
    if not key_file.exists():
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
    return SQLiteAuditLog(state_dir / "audit.sqlite", rotation=rotation), key_file.read_bytes()

"""Fix memory files of older versions (``fixes.sqlite`` beside the state database), moved into
the state store once: the first start that finds one copies its fixes (an owner's newer fix
for the same error wins) and renames the file ``fixes.sqlite.imported``, kept for whoever wants
to check it and never read again."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from codemode.memory.fixes import Fix
from codemode.memory.kv import KVFixes
from codemode.state.store import KeyValueStore

__all__ = ["LEGACY_FILE", "import_legacy_fixes", "open_fixes"]

log = logging.getLogger(__name__)

LEGACY_FILE = "fixes.sqlite"


def open_fixes(store: KeyValueStore, state_dir: Path) -> KVFixes:
    """The fix memory in ``store``, with any older file in ``state_dir`` imported first."""
    memory = KVFixes(store)
    import_legacy_fixes(state_dir / LEGACY_FILE, memory)
    return memory


def import_legacy_fixes(path: Path, memory: KVFixes) -> int:
    """Copy the fixes of an older version's file into ``memory`` and set the file aside;
    returns how many were added. A file that cannot be read is left where it is (logged)."""
    if not path.exists():
        return 0
    try:
        database = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            rows = database.execute(
                "SELECT owner, signature, diff, recorded, uses FROM fixes ORDER BY seen"
            ).fetchall()
        finally:
            database.close()
    except sqlite3.Error as error:
        log.warning("the older fix memory %s could not be read (%s); left in place", path, error)
        return 0
    added = sum(memory.restore(Fix(*row)) for row in rows)
    for suffix in ("", "-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(side.with_name(f"{path.name}.imported{suffix}"))
    log.info("moved %d fix(es) from %s into the state store", added, path)
    return added

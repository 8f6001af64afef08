"""Where the search daemons of this user live, and what identifies one.

``$CODEMODE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/codemode``, else ``/tmp/codemode-<uid>``:
created 0700; used only when it is a real directory owned by this user that nobody else can
enter (else no daemon is used, and search answers in the process).
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

__all__ = [
    "DAEMON_ENV",
    "IDLE_ENV",
    "code_stamp",
    "daemon_enabled",
    "daemon_key",
    "idle_seconds",
    "runtime_dir",
    "socket_path",
]

DAEMON_ENV = "CODEMODE_SEARCH_DAEMON"
IDLE_ENV = "CODEMODE_SEARCH_IDLE_S"
DEFAULT_IDLE_S = 600.0


def daemon_enabled() -> bool:
    return os.environ.get(DAEMON_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def idle_seconds() -> float:
    try:
        return max(0.05, float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def runtime_dir() -> Path | None:
    """This user's private runtime directory, or None when none can be had safely."""
    uid = os.getuid()
    if explicit := os.environ.get("CODEMODE_RUNTIME_DIR"):
        path = Path(explicit)
    elif xdg := os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(xdg) / "codemode"
    else:
        path = Path("/tmp") / f"codemode-{uid}"  # noqa: S108 - checked below: ours, 0700
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o077
    return path if private and info.st_uid == uid else None


def socket_path(directory: Path, key: str) -> Path:
    return directory / f"s-{key}.sock"


def code_stamp() -> str:
    """This installation of codemode: where its package is, and the size and mtime of the files
    whose change must not reuse old answers (a new version, a reinstall). Read with two
    ``stat`` calls: the package metadata (``codemode.__version__``) costs more to import than
    a whole search answered by the daemon."""
    package = Path(__file__).resolve().parents[2]
    parts = [str(package)]
    for name in ("__init__.py", "search/store.py", "search/semantic.py"):
        try:
            info = (package / name).stat()
        except OSError:
            continue
        parts.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
    return "|".join(parts)


def daemon_key(fingerprint: str, semantic: bool, cache_dir: Path) -> str:
    """One daemon per stored index, interpreter, installation of codemode and model files (a
    daemon holding one model never answers for another: ``$CODEMODE_MODEL_DIR`` changed)."""
    parts = [fingerprint, str(semantic), str(cache_dir), code_stamp(), sys.executable]
    if semantic:
        parts.append(_model_stamp(cache_dir))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _model_stamp(cache_dir: Path) -> str:
    """Where the model is and which variant of it (found with a few ``stat`` calls)."""
    from codemode.search.model.locations import find_model
    from codemode.search.weights import model_variant

    path = find_model()
    if path is None:
        return "no model"
    try:
        return f"{path}|{model_variant(path, cache_dir)}"
    except OSError:
        return f"{path}|unreadable"

"""Where skills live: a small Protocol, its in-memory twin and the folder store (the default).

``FolderSkills`` keeps ``<root>/<owner>/<name>/`` folders in the Agent Skills layout and caches
parsed skills, checked against SKILL.md's modification time, so an import costs one ``stat``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Protocol

from codemode.errors import StateStoreError
from codemode.skills.model import (
    Skill,
    folder_name,
    parse_skill,
    render_provenance,
    render_skill_md,
    valid_name,
)
from codemode.storage.private import private_dir

__all__ = ["FolderSkills", "MemorySkills", "SkillStore", "owner_key", "read_skill_folder"]

_SAFE_OWNER = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def owner_key(owner: str | None) -> str:
    """The name an owner's skills are filed under ('-' for the anonymous local owner)."""
    if owner is None:
        return "-"
    if _SAFE_OWNER.fullmatch(owner) and owner not in (".", ".."):
        return owner
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


class SkillStore(Protocol):
    def get(self, owner: str, name: str) -> Skill | None: ...

    def put(self, skill: Skill) -> None: ...

    def delete(self, owner: str, name: str) -> bool: ...

    def list(self, owner: str | None = None) -> list[Skill]:
        """The skills of ``owner``, or of every owner when None, sorted by owner and name."""
        ...


class MemorySkills:
    """The in-memory twin, for tests."""

    def __init__(self) -> None:
        self._skills: dict[tuple[str, str], Skill] = {}
        self._lock = threading.Lock()

    def get(self, owner: str, name: str) -> Skill | None:
        with self._lock:
            return self._skills.get((owner, name))

    def put(self, skill: Skill) -> None:
        with self._lock:
            self._skills[(skill.owner, skill.name)] = skill

    def delete(self, owner: str, name: str) -> bool:
        with self._lock:
            return self._skills.pop((owner, name), None) is not None

    def list(self, owner: str | None = None) -> list[Skill]:
        with self._lock:
            found = [s for (o, _), s in self._skills.items() if owner is None or o == owner]
        return sorted(found, key=lambda s: (s.owner, s.name))


class FolderSkills:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple[str, str], tuple[tuple[int, int], Skill]] = {}
        self._lock = threading.Lock()

    def _folder(self, owner: str, name: str) -> Path:
        if not valid_name(name):
            raise StateStoreError(f"{name!r} is not a skill name", fix="use a Python identifier")
        return self.root / owner / folder_name(name)

    def get(self, owner: str, name: str) -> Skill | None:
        if not valid_name(name):
            return None
        folder = self._folder(owner, name)
        try:
            version = _version(folder)
        except OSError:
            return None
        with self._lock:
            cached = self._cache.get((owner, name))
        if cached is not None and cached[0] == version:
            return cached[1]
        skill = read_skill_folder(folder, owner)
        with self._lock:
            self._cache[(owner, name)] = (version, skill)
        return skill

    def put(self, skill: Skill) -> None:
        folder = self._folder(skill.owner, skill.name)
        try:
            private_dir(folder / "scripts")
            _write(folder / "scripts" / f"{skill.name}.py", skill.source)
            _write(folder / "scripts" / f"test_{skill.name}.py", skill.tests)
            _write(folder / "provenance.json", render_provenance(skill))
            _write(folder / "SKILL.md", render_skill_md(skill))  # last: it marks the version
        except OSError as error:
            raise StateStoreError(
                f"cannot write skill {skill.key} under {self.root}: {error}",
                fix="check that gateway.state_dir is writable",
            ) from None
        with self._lock:
            self._cache.pop((skill.owner, skill.name), None)

    def delete(self, owner: str, name: str) -> bool:
        folder = self._folder(owner, name)
        with self._lock:
            self._cache.pop((owner, name), None)
        if not folder.is_dir():
            return False
        shutil.rmtree(folder)
        return True

    def list(self, owner: str | None = None) -> list[Skill]:
        owners = [owner] if owner is not None else _children(self.root)
        found: list[Skill] = []
        for who in sorted(owners):
            for folder in sorted(_children(self.root / who)):
                skill = self.get(who, folder.replace("-", "_"))
                if skill is not None:
                    found.append(skill)
        return found


def read_skill_folder(folder: Path, owner: str) -> Skill:
    """Read ``folder`` (SKILL.md, scripts/, provenance.json when present) as ``owner``'s."""
    try:
        skill_md = (folder / "SKILL.md").read_text(encoding="utf-8")
        name = folder.name.replace("-", "_")
        scripts = folder / "scripts"
        raw = _read_optional(folder / "provenance.json")
        provenance = json.loads(raw) if raw else {}
        return parse_skill(
            skill_md,
            source=(scripts / f"{name}.py").read_text(encoding="utf-8"),
            tests=_read_optional(scripts / f"test_{name}.py"),
            owner=owner,
            provenance=provenance if isinstance(provenance, dict) else {},
        )
    except (OSError, ValueError) as error:
        raise StateStoreError(
            f"skill folder {folder} is unreadable: {error}",
            fix="give it SKILL.md (name, description) and scripts/<name>.py, or remove it",
        ) from None


def _version(folder: Path) -> tuple[int, int]:
    """What a person's edit changes: SKILL.md's and provenance.json's modification times."""
    skill_md = (folder / "SKILL.md").stat().st_mtime_ns
    try:
        provenance = (folder / "provenance.json").stat().st_mtime_ns
    except FileNotFoundError:
        provenance = 0
    return skill_md, provenance


def _children(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _read_optional(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _write(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

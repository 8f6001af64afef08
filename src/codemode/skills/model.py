"""A saved skill and its folder in the Agent Skills layout.

    <name>/SKILL.md          front matter (name, description, metadata) and a short usage note
    <name>/<name>.py         the module: ``from skills import <name>`` imports its ``<name>``
    <name>/test_<name>.py    its tests (``test_*`` functions or plain asserts)

People can read, review, edit and version the folder with git. Provenance (who saved it, when,
from which session, the tools it calls and their schema fingerprints) lives in the front
matter's ``metadata``; counters that change on every use live in a key-value store instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Skill", "parse_skill_md", "render_skill_md", "valid_name"]

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
# Names a skill may not take: the package's own API.
RESERVED = frozenset({"save", "search"})


def valid_name(name: object) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and name not in RESERVED


@dataclass(frozen=True)
class Skill:
    name: str
    owner: str
    description: str
    source: str
    tests: str
    signature: str = ""
    saved_at: float = 0.0
    session: str | None = None
    # "server.tool" names the code calls, found statically, and their schema fingerprints.
    tools: tuple[str, ...] = ()
    fingerprints: dict[str, str] = field(default_factory=dict)
    # Other skills it imports.
    requires: tuple[str, ...] = ()
    shared: bool = False
    approved: bool = False
    # Why the skill is stale (a tool it calls changed its schema), and its tests' last verdict.
    stale: str | None = None
    last_test: str | None = None

    @property
    def key(self) -> str:
        return f"{self.owner}/{self.name}"

    def with_changes(self, **changes: Any) -> Skill:
        return replace(self, **changes)

    def metadata(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "signature": self.signature,
            "saved_at": self.saved_at,
            "session": self.session,
            "tools": list(self.tools),
            "fingerprints": dict(self.fingerprints),
            "requires": list(self.requires),
            "shared": self.shared,
            "approved": self.approved,
            "stale": self.stale,
            "last_test": self.last_test,
        }


def render_skill_md(skill: Skill) -> str:
    # JSON strings are valid YAML scalars: the front matter stays parseable by YAML readers.
    lines = [
        "---",
        f"name: {json.dumps(skill.name)}",
        f"description: {json.dumps(skill.description)}",
        f"metadata: {json.dumps(skill.metadata(), sort_keys=True)}",
        "---",
        "",
        f"# {skill.name}",
        "",
        skill.description,
        "",
        "```python",
        f"from skills import {skill.name}",
        f"{skill.signature or skill.name}",
        "```",
        "",
        f"The code is in `{skill.name}.py`, its tests in `test_{skill.name}.py`.",
        "",
    ]
    return "\n".join(lines)


def parse_skill_md(text: str, *, source: str, tests: str, owner: str) -> Skill:
    """The skill a SKILL.md describes (``ValueError`` when its front matter is unreadable)."""
    if not text.startswith("---\n"):
        raise ValueError("SKILL.md must start with '---' front matter")
    header, sep, _ = text[4:].partition("\n---")
    if not sep:
        raise ValueError("SKILL.md front matter has no closing '---'")
    fields: dict[str, Any] = {}
    for line in header.splitlines():
        key, colon, value = line.partition(":")
        if not colon:
            continue
        value = value.strip()
        try:
            fields[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            fields[key.strip()] = value.strip("'\"")
    name, description = fields.get("name"), fields.get("description")
    if not valid_name(name) or not isinstance(description, str):
        raise ValueError("SKILL.md needs a `name` (a Python identifier) and a `description`")
    meta = fields.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return Skill(
        name=str(name),
        owner=owner,
        description=description,
        source=source,
        tests=tests,
        signature=str(meta.get("signature", "")),
        saved_at=float(meta.get("saved_at") or 0.0),
        session=meta.get("session") if isinstance(meta.get("session"), str) else None,
        tools=tuple(str(t) for t in meta.get("tools") or ()),
        fingerprints={str(k): str(v) for k, v in (meta.get("fingerprints") or {}).items()},
        requires=tuple(str(r) for r in meta.get("requires") or ()),
        shared=bool(meta.get("shared", False)),
        approved=bool(meta.get("approved", False)),
        stale=meta.get("stale") if isinstance(meta.get("stale"), str) else None,
        last_test=meta.get("last_test") if isinstance(meta.get("last_test"), str) else None,
    )

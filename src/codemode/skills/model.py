"""A saved skill and its folder in the Agent Skills layout (agentskills.io).

    <skill-name>/SKILL.md                       front matter: name, description, metadata
    <skill-name>/scripts/<skill_name>.py        the module: ``from skills import <skill_name>``
    <skill-name>/scripts/test_<skill_name>.py   its tests (``test_*`` functions or asserts)
    <skill-name>/provenance.json                tools it calls, their schema fingerprints,
                                                sharing, approval, staleness (for codemode)

People can read, review, edit and version the folder with git. The folder's name is the
Python name with dashes (the spec allows lower-case letters, digits and single dashes).
Counters that change on every use live in a key-value store instead.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Skill",
    "folder_name",
    "parse_skill",
    "render_provenance",
    "render_skill_md",
    "valid_name",
]

# A Python identifier that maps to a valid Agent Skills name (dashes for underscores).
_NAME = re.compile(r"(?=.{1,64}$)[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
# Names a skill may not take: the package's own API.
RESERVED = frozenset({"save", "search"})


def valid_name(name: object) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and name not in RESERVED


def folder_name(name: str) -> str:
    return name.replace("_", "-")


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
    # Packages it imports that its session had installed (requirements, as installed).
    packages: tuple[str, ...] = ()
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

    def provenance(self) -> dict[str, Any]:
        return {
            "saved_at": self.saved_at,
            "session": self.session,
            "tools": list(self.tools),
            "fingerprints": dict(self.fingerprints),
            "requires": list(self.requires),
            "packages": list(self.packages),
            "shared": self.shared,
            "approved": self.approved,
            "stale": self.stale,
            "last_test": self.last_test,
        }


def render_skill_md(skill: Skill) -> str:
    saved = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(skill.saved_at))
    metadata = {
        "python-name": skill.name,
        "signature": skill.signature,
        "owner": skill.owner,
        "saved-at": saved,
        "session": skill.session or "",
    }
    # JSON strings are valid YAML scalars: any YAML reader parses this front matter.
    lines = ["---", f"name: {folder_name(skill.name)}"]
    lines.append(f"description: {json.dumps(skill.description)}")
    lines.append("metadata:")
    lines += [f"  {key}: {json.dumps(value)}" for key, value in metadata.items()]
    lines += [
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
        f"The code is in `scripts/{skill.name}.py`, its tests in `scripts/test_{skill.name}.py`.",
        "",
    ]
    return "\n".join(lines)


def render_provenance(skill: Skill) -> str:
    return json.dumps(skill.provenance(), indent=2, sort_keys=True) + "\n"


def _front_matter(text: str) -> dict[str, Any]:
    if not text.startswith("---\n"):
        raise ValueError("SKILL.md must start with '---' front matter")
    header, sep, _ = text[4:].partition("\n---")
    if not sep:
        raise ValueError("SKILL.md front matter has no closing '---'")
    fields: dict[str, Any] = {}
    section: dict[str, str] | None = None
    for line in header.splitlines():
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            continue
        value = value.strip()
        try:
            parsed = json.loads(value) if value else ""
        except json.JSONDecodeError:
            parsed = value.strip("'\"")
        if line.startswith((" ", "\t")) and section is not None:
            section[key.strip()] = str(parsed)
        elif not value:
            section = fields[key.strip()] = {}
        else:
            fields[key.strip()] = parsed
            section = None
    return fields


def parse_skill(
    skill_md: str, *, source: str, tests: str, owner: str, provenance: dict[str, Any]
) -> Skill:
    """The skill a folder describes (``ValueError`` when SKILL.md is unreadable)."""
    fields = _front_matter(skill_md)
    meta = fields.get("metadata") if isinstance(fields.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = meta.get("python-name") or str(fields.get("name", "")).replace("-", "_")
    description = fields.get("description")
    if not valid_name(name) or not isinstance(description, str) or not description:
        raise ValueError("SKILL.md needs a `name` (lower-case, dashes) and a `description`")
    p = provenance

    def text(key: str) -> str | None:
        value = p.get(key)
        return value if isinstance(value, str) else None

    return Skill(
        name=str(name),
        owner=owner,
        description=description,
        source=source,
        tests=tests,
        signature=str(meta.get("signature", "")),
        saved_at=float(p.get("saved_at") or 0.0),
        session=text("session"),
        tools=tuple(str(t) for t in p.get("tools") or ()),
        fingerprints={str(k): str(v) for k, v in (p.get("fingerprints") or {}).items()},
        requires=tuple(str(r) for r in p.get("requires") or ()),
        packages=tuple(str(r) for r in p.get("packages") or ()),
        shared=p.get("shared") is True,
        approved=p.get("approved") is True,
        stale=text("stale"),
        last_test=text("last_test"),
    )

"""The skills of every owner: what a session may import, what search shows, what went stale.

Visibility: an owner sees their own skills, and skills other owners saved with ``shared=True``
once a person approved them (config ``skills.shared_need_approval``). A skill's dependencies
are fingerprinted at save time; when a tool's schema changes, the skill is marked stale and its
tests are rerun.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from codemode.bridge.host import ModuleSource
from codemode.errors import SkillNotFoundError, SkillRefusedError
from codemode.settings.skills import SkillsSettings
from codemode.skills.analysis import analyze
from codemode.skills.guest_code import package_source, save_source
from codemode.skills.model import Skill, valid_name
from codemode.skills.store import SkillStore
from codemode.skills.usage import SkillUsage, Usage
from codemode.stubs.naming import server_names, tool_names
from codemode.tools import ToolSpec

__all__ = ["SkillHit", "SkillLibrary", "fingerprint"]

# Runs a skill's tests in a fresh sandbox: (skill) -> (passed, output).
TestRun = Callable[[Skill], tuple[bool, str]]
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "to",
        "in",
        "for",
        "on",
        "with",
        "by",
        "from",
        "is",
        "it",
        "this",
        "that",
    ]
)


def fingerprint(spec: ToolSpec) -> str:
    schemas = {"input": spec.input_schema, "output": spec.output_schema}
    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SkillHit:
    skill: Skill
    usage: Usage
    score: float

    def to_json(self) -> dict[str, object]:
        skill = self.skill
        return {
            "kind": "skill",
            "python_name": f"skills.{skill.name}",
            "owner": skill.owner,
            "signature": skill.signature,
            "summary": skill.description,
            "score": round(self.score, 6),
            "usage": {"imports": self.usage.imports, "ok": self.usage.ok},
            "failed": self.usage.failed,
            "stale": skill.stale,
            "tools": list(skill.tools),
        }

    def render(self) -> str:
        skill = self.skill
        line = f"- skills.{skill.signature or skill.name}: {skill.description} "
        line += f"[{self.usage.describe()}]"
        if skill.stale:
            line += f" [STALE: {skill.stale}; tests {skill.last_test or 'not rerun'}]"
        return line


class SkillLibrary:
    def __init__(
        self,
        store: SkillStore,
        usage: SkillUsage,
        settings: SkillsSettings,
        specs: Callable[[], list[ToolSpec]],
    ) -> None:
        self.store = store
        self.usage = usage
        self.settings = settings
        self._specs = specs
        self._checked: frozenset[tuple[str, str]] | None = None
        self._check_lock = threading.Lock()

    # --- what an owner may import -----------------------------------------------------------

    def find(self, owner: str, name: str) -> Skill | None:
        """``owner``'s own skill, else an importable shared one; refuses an unapproved one."""
        if not valid_name(name):
            return None
        own = self.store.get(owner, name)
        if own is not None:
            return own
        waiting = None
        for skill in self.store.list():
            if skill.name == name and skill.shared and skill.owner != owner:
                if skill.approved or not self.settings.shared_need_approval:
                    return skill
                waiting = skill
        if waiting is not None:
            raise SkillRefusedError(
                f"skill {name!r} is shared by another owner and not approved yet",
                fix=f"a person reviews it and runs `codemode skills approve {waiting.key}`",
            )
        return None

    def module_source(self, owner: str, fullname: str) -> tuple[ModuleSource | None, Skill | None]:
        """The source of ``skills`` or ``skills.<name>`` for ``owner``, and the skill served.
        An unapproved shared skill is served as a module that raises the refusal."""
        if fullname == "skills":
            return ModuleSource(package_source(), True, "skills/__init__.py"), None
        name = fullname.partition(".")[2]
        filename = f"skills/{name}.py"
        if name == "_save":
            return ModuleSource(save_source(), False, filename), None
        try:
            skill = self.find(owner, name)
        except SkillRefusedError as error:
            return ModuleSource(f"raise ImportError({str(error)!r})\n", False, filename), None
        if skill is None:
            return None, None
        return ModuleSource(skill.source, False, filename), skill

    def visible(self, owner: str) -> list[Skill]:
        shown = {skill.name: skill for skill in self.store.list(owner)}
        for skill in self.store.list():
            if self._importable_shared(skill, owner) and skill.name not in shown:
                shown[skill.name] = skill
        return list(shown.values())

    def _importable_shared(self, skill: Skill, owner: str) -> bool:
        open_to_all = skill.approved or not self.settings.shared_need_approval
        return skill.shared and skill.owner != owner and open_to_all

    def get(self, owner: str, name: str) -> Skill:
        skill = self.store.get(owner, name)
        if skill is None:
            raise SkillNotFoundError(
                f"no skill {owner}/{name}", fix="`codemode skills list` shows the saved skills"
            )
        return skill

    # --- saving -----------------------------------------------------------------------------

    def prepare(
        self,
        *,
        owner: str,
        session: str | None,
        name: object,
        description: object,
        source: object,
        tests: object,
        shared: bool,
    ) -> Skill:
        """Check and analyze a skill the code wants to save (not yet tested nor stored)."""
        if not valid_name(name):
            raise SkillRefusedError(
                f"{name!r} is not a skill name",
                fix="use a lower-case Python identifier (not 'save' or 'search')",
            )
        assert isinstance(name, str)
        limit = self.settings.max_source_bytes
        for label, text in (("source", source), ("tests", tests)):
            if not isinstance(text, str) or not text.strip():
                raise SkillRefusedError(f"a skill's {label} must be non-empty text")
            if len(text.encode()) > limit:
                raise SkillRefusedError(
                    f"the skill's {label} is over {limit:,} bytes",
                    fix="save a smaller function; keep data in workspace files",
                )
        if not isinstance(description, str) or not description.strip():
            raise SkillRefusedError("a skill needs a description", fix="pass description=...")
        assert isinstance(source, str) and isinstance(tests, str)
        facts = analyze(source, name)
        if not _has_checks(tests):
            raise SkillRefusedError(
                "the tests check nothing (no assert and no test_* function)",
                fix=f"import it (`from skills import {name}`) and assert what it returns",
            )
        for required in facts.requires:
            if self.find(owner, required) is None:
                raise SkillRefusedError(
                    f"skill {name!r} imports skill {required!r}, which does not exist",
                    fix=f"save {required!r} first",
                )
        tools = self._resolve(facts.tool_calls)
        return Skill(
            name=name,
            owner=owner,
            description=" ".join(description.split())[:1024],
            source=source,
            tests=tests,
            signature=facts.signature,
            saved_at=time.time(),
            session=session,
            tools=tuple(sorted(tools)),
            fingerprints=tools,
            requires=facts.requires,
            shared=shared,
        )

    def _resolve(self, calls: tuple[tuple[str, str], ...]) -> dict[str, str]:
        """Python names (shop.list_items) -> upstream 'server.tool' -> schema fingerprint."""
        index = _python_index(self._specs())
        found: dict[str, str] = {}
        for server, tool in calls:
            spec = index.get((server, tool))
            if spec is not None:
                found[spec.qualified_name] = fingerprint(spec)
        return found

    # --- staleness --------------------------------------------------------------------------

    def check_stale(self, run_tests: TestRun) -> list[Skill]:
        """Mark skills whose tools changed their schema (or vanished), and rerun their tests.
        Cheap when nothing changed since the last check."""
        specs = self._specs()
        state = frozenset((spec.qualified_name, fingerprint(spec)) for spec in specs)
        with self._check_lock:
            if state == self._checked:
                return []
            self._checked = state
            current = dict(state)
            marked: list[Skill] = []
            for skill in self.store.list():
                changed = sorted(
                    tool
                    for tool, printed in skill.fingerprints.items()
                    if current.get(tool) != printed
                )
                if not changed:
                    continue
                reason = ", ".join(changed) + " changed its schema"
                if skill.stale == reason:
                    continue
                passed, output = run_tests(skill)
                verdict = "passed" if passed else "failed: " + output.strip()[-300:]
                updated = skill.with_changes(stale=reason, last_test=verdict)
                self.store.put(updated)
                marked.append(updated)
            return marked

    # --- search -----------------------------------------------------------------------------

    def search(self, owner: str, query: str, limit: int = 3) -> list[SkillHit]:
        words = [w for w in _WORD.findall(query.lower()) if w not in _STOP]
        if not words:
            return []
        hits: list[SkillHit] = []
        for skill in self.visible(owner):
            text = " ".join((skill.name.replace("_", " "), skill.description, skill.signature))
            vocabulary = set(_WORD.findall(text.lower().replace("_", " ")))
            matched = sum(
                1.0 if word in vocabulary else 0.5
                for word in words
                if word in vocabulary or any(v.startswith(word[:5]) for v in vocabulary)
            )
            relevance = matched / len(words)
            if relevance < 0.34:
                continue
            usage = self.usage.of(skill)
            score = relevance * (0.5 + usage.success_rate) * (0.5 if skill.stale else 1.0)
            hits.append(SkillHit(skill, usage, score))
        hits.sort(key=lambda hit: -hit.score)
        return hits[:limit]


def _has_checks(tests: str) -> bool:
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return True  # the test run reports the syntax error with its line
    return any(
        isinstance(node, ast.Assert)
        or (isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))
        for node in ast.walk(tree)
    )


def _python_index(specs: list[ToolSpec]) -> dict[tuple[str, str], ToolSpec]:
    by_server: dict[str, list[ToolSpec]] = {}
    for spec in specs:
        by_server.setdefault(spec.server, []).append(spec)
    packages = server_names(by_server)
    index: dict[tuple[str, str], ToolSpec] = {}
    for server, group in by_server.items():
        names = tool_names(spec.name for spec in group)
        for spec in group:
            index[(packages[server], names[spec.name])] = spec
    return index

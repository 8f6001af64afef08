"""``codemode skills list|show|test|export|import|rm|approve``: the saved skills, for people.

A skill is named ``NAME`` (the local owner's) or ``OWNER/NAME``. ``approve`` lets other owners
import a skill its author shared; review it first: a saved skill can carry a prompt injection.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig
    from codemode.skills.library import SkillLibrary

__all__ = ["HELP", "add_arguments", "run"]

HELP = "list, show, test, export, import, remove or approve saved skills"

_ACTIONS = ("list", "show", "test", "export", "import", "rm", "approve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=_ACTIONS)
    parser.add_argument("target", nargs="?", help="NAME or OWNER/NAME (a folder for import)")
    parser.add_argument("destination", nargs="?", type=Path, help="export: the folder to write")
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument("--owner", default="-", help="whose skills ('-': the local owner)")
    parser.add_argument("--all", action="store_true", help="list: every owner's skills")


@contextmanager
def _library(config: CodemodeConfig) -> Iterator[SkillLibrary]:
    from codemode.skills.library import SkillLibrary
    from codemode.skills.store import FolderSkills
    from codemode.skills.usage import SkillUsage
    from codemode.state.open import open_state_store

    state = open_state_store(config.state, config.gateway.state_dir)
    try:
        store = FolderSkills(config.gateway.state_dir / "skills")
        yield SkillLibrary(store, SkillUsage(state), config.skills, list)
    finally:
        state.close()


def _split(target: str | None, owner: str) -> tuple[str, str]:
    from codemode.errors import UsageError

    if not target:
        raise UsageError("this action needs a skill", fix="write NAME or OWNER/NAME")
    who, _, name = target.rpartition("/")
    return (who or owner), name


def run(args: argparse.Namespace) -> int:
    from codemode.config import load_config
    from codemode.skills.model import folder_name

    config = load_config(args.config)
    if args.action == "test":
        return _test(config, *_split(args.target, args.owner))
    with _library(config) as library:
        if args.action == "list":
            return _list(library, None if args.all else args.owner)
        if args.action == "import":
            return _import(library, args.target, args.owner)
        owner, name = _split(args.target, args.owner)
        skill = library.get(owner, name)
        if args.action == "show":
            usage = library.usage.of(skill)
            print(f"{skill.key}: {skill.signature}\n{skill.description}\n")
            print(f"saved {_when(skill.saved_at)} from session {skill.session or '-'}")
            print(f"calls: {', '.join(skill.tools) or 'no tools'}; {usage.describe()}")
            print(f"shared: {skill.shared}, approved: {skill.approved}, stale: {skill.stale}")
            print(f"\n{skill.source}\n# tests\n{skill.tests}")
        elif args.action == "export":
            destination = args.destination or Path.cwd()
            folder = folder_name(name)
            source = config.gateway.state_dir / "skills" / owner / folder
            shutil.copytree(source, destination / folder, dirs_exist_ok=True)
            print(f"exported {skill.key} to {destination / folder}")
        elif args.action == "rm":
            library.store.delete(owner, name)
            library.usage.forget(skill)
            print(f"removed {skill.key}")
        elif args.action == "approve":
            library.store.put(skill.with_changes(approved=True))
            print(f"approved {skill.key}: other owners may import it now")
    return 0


def _list(library: SkillLibrary, owner: str | None) -> int:
    skills = library.store.list(owner)
    if not skills:
        print("no saved skills")
    for skill in skills:
        marks = [library.usage.of(skill).describe()]
        if skill.shared:
            marks.append("shared" + ("" if skill.approved else ", awaiting approval"))
        if skill.stale:
            marks.append(f"STALE: {skill.stale}")
        print(f"{skill.key}  {skill.signature}  [{'; '.join(marks)}]")
    return 0


def _import(library: SkillLibrary, folder: str | None, owner: str) -> int:
    from codemode.skills.analysis import analyze
    from codemode.skills.store import read_skill_folder

    skill = read_skill_folder(Path(folder or "."), owner)
    facts = analyze(skill.source, skill.name)
    # A person brings it in: untested here and not approved for other owners until reviewed.
    library.store.put(skill.with_changes(signature=facts.signature, stale=None, approved=False))
    print(f"imported {skill.key}; run `codemode skills test {skill.key}` to check it")
    return 0


def _test(config: CodemodeConfig, owner: str, name: str) -> int:
    import anyio

    from codemode.engine import Codemode

    async def check() -> int:
        async with Codemode(config, audit=False) as engine:
            runtime = engine.skills
            assert runtime is not None and runtime.library is not None
            skill = runtime.library.get(owner, name)
            passed, output = await anyio.to_thread.run_sync(
                runtime.tester(runtime.test_invoker).run, skill
            )
            verdict = "passed" if passed else "failed: " + output[-300:]
            runtime.library.store.put(skill.with_changes(last_test=verdict))
            print(output)
            print(f"{skill.key}: tests {'passed' if passed else 'FAILED'}")
            return 0 if passed else 1

    return anyio.run(check)


def _when(timestamp: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp)) if timestamp else "-"

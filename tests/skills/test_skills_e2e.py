"""Skills end to end through the gateway (official MCP client, real sandboxes), against the
embedded state store and a real Redis-compatible server."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.skills.model import Skill

pytestmark = pytest.mark.anyio

SAVE = '''\
from servers import shop
from skills import save

def first_item_with_prefix(prefix: str) -> str:
    """Pick the first item for sale whose name starts with a prefix."""
    for item in shop.list_items():
        if item.startswith(prefix):
            return item
    return ""

TESTS = """
from skills import first_item_with_prefix

def test_pear():
    assert first_item_with_prefix("p") == "pear"

def test_nothing():
    assert first_item_with_prefix("z") == ""
"""
print(save(first_item_with_prefix, tests=TESTS))
'''

USE = "from skills import first_item_with_prefix\nprint(first_item_with_prefix('a'))"


def library(engine: Codemode) -> Any:
    assert engine.skills is not None and engine.skills.library is not None
    return engine.skills.library


async def test_a_skill_saved_in_one_session_is_found_and_imported_in_the_next(
    engine: Codemode, gateway: Any
) -> None:
    saved = await gateway.execute(SAVE)
    assert saved["status"] == "ok", saved
    assert saved["stdout"].startswith("saved skill first_item_with_prefix (2 test(s) passed)")
    folder = engine.config.gateway.state_dir / "skills" / "-" / "first-item-with-prefix"
    front = yaml.safe_load((folder / "SKILL.md").read_text().split("---")[1])
    assert front["name"] == "first-item-with-prefix"  # the spec: lower case and dashes
    assert front["description"] == "Pick the first item for sale whose name starts with a prefix."
    assert all(isinstance(value, str) for value in front["metadata"].values())
    assert front["metadata"]["python-name"] == "first_item_with_prefix"
    scripts = folder / "scripts"
    assert "def test_pear" in (scripts / "test_first_item_with_prefix.py").read_text()
    assert "from servers import shop" in (scripts / "first_item_with_prefix.py").read_text()
    assert json.loads((folder / "provenance.json").read_text())["tools"] == ["shop.list_items"]
    skill = library(engine).store.get("-", "first_item_with_prefix")
    assert skill.tools == ("shop.list_items",) and skill.session == saved["session"]
    assert set(skill.fingerprints) == {"shop.list_items"} and skill.saved_at > 0

    text, hits = await gateway.search("first item starting with a prefix")
    found = [hit for hit in hits if hit.get("kind") == "skill"]
    assert found[0]["python_name"] == "skills.first_item_with_prefix"
    assert found[0]["signature"] == "first_item_with_prefix(prefix: str) -> str"
    assert "Saved skills" in text and "not used yet" in text

    used = await gateway.execute(USE)  # a new session of the same owner
    assert used["session"] != saved["session"]
    assert (used["status"], used["stdout"]) == ("ok", "apple\n"), used
    again = await gateway.execute("print(first_item_with_prefix('q'))", session=used["session"])
    assert again["status"] == "ok"
    failed = await gateway.execute("first_item_with_prefix(None)", session=used["session"])
    assert failed["status"] == "error"
    usage = library(engine).usage.of(skill)
    assert (usage.imports, usage.ok, usage.failed) == (1, 2, 1)
    text, _ = await gateway.search("first item starting with a prefix")
    assert "imported 1x, 2/3 executions ok" in text


async def test_a_failing_test_refuses_the_save_with_its_output(
    engine: Codemode, gateway: Any
) -> None:
    code = (
        "from skills import save\n"
        "def double(x: int) -> int:\n"
        '    """Twice x."""\n'
        "    return x * 3\n"
        "save(double, tests='from skills import double\\ndef test_two():\\n"
        '    assert double(2) == 4, "double(2) gave %s" % double(2)\\n\')\n'
    )
    refused = await gateway.execute(code)
    assert refused["status"] == "error"
    message = refused["error"]["message"]
    assert "the tests of skill 'double' failed, so it was not saved" in message
    assert "FAILED test_two" in message and "double(2) gave 6" in message
    assert library(engine).store.get("-", "double") is None
    missing = await gateway.execute("from skills import double")
    assert "no saved skill named 'double'" in missing["error"]["message"]


async def test_a_dependent_tools_schema_change_marks_the_skill_stale(
    engine: Codemode, gateway: Any, shop: Any
) -> None:
    assert (await gateway.execute(SAVE))["status"] == "ok"

    def list_items(category: str) -> list[str]:
        """List the items of one category."""
        return ["apple"] if category else []

    connector = engine.catalog.connector("shop")
    assert isinstance(connector, PythonConnector)
    changed = PythonConnector("shop", [list_items, shop.functions()[1]])
    connector._tools = changed._tools  # the upstream changed its schema
    await engine.catalog.refresh("shop")

    text, hits = await gateway.search("first item starting with a prefix")
    hit = next(hit for hit in hits if hit.get("kind") == "skill")
    assert hit["stale"] == "shop.list_items changed its schema"
    assert "STALE: shop.list_items changed its schema; tests failed" in text
    stale = library(engine).store.get("-", "first_item_with_prefix")
    assert stale.last_test.startswith("failed") and "category" in stale.last_test


async def test_other_owners_skills_are_invisible_and_shared_ones_need_approval(
    engine: Codemode, gateway: Any
) -> None:
    store = library(engine).store

    def foreign(name: str, *, shared: bool, approved: bool = False) -> Skill:
        source = f'def {name}() -> str:\n    """Say hello from elsewhere."""\n    return "hi"\n'
        return Skill(
            name=name,
            owner="someone-else",
            description="Say hello from elsewhere",
            source=source,
            tests=f"from skills import {name}\nassert {name}() == 'hi'\n",
            signature=f"{name}() -> str",
            shared=shared,
            approved=approved,
        )

    store.put(foreign("private_hello", shared=False))
    store.put(foreign("shared_hello", shared=True))
    _, hits = await gateway.search("say hello from elsewhere")
    assert not [hit for hit in hits if hit.get("kind") == "skill"]
    private = await gateway.execute("from skills import private_hello")
    assert "no saved skill named 'private_hello'" in private["error"]["message"]
    waiting = await gateway.execute("from skills import shared_hello")
    assert waiting["status"] == "error"
    assert "not approved yet" in waiting["error"]["message"]
    assert "codemode skills approve someone-else/shared_hello" in waiting["error"]["message"]

    store.put(store.get("someone-else", "shared_hello").with_changes(approved=True))
    approved = await gateway.execute("from skills import shared_hello\nprint(shared_hello())")
    assert (approved["status"], approved["stdout"]) == ("ok", "hi\n"), approved
    _, hits = await gateway.search("say hello from elsewhere")
    assert [hit["python_name"] for hit in hits if hit.get("kind") == "skill"] == [
        "skills.shared_hello"
    ]


async def test_a_function_from_an_earlier_execution_or_source_text_can_be_saved(
    engine: Codemode, gateway: Any
) -> None:
    defined = await gateway.execute(
        "import re\n"
        "def slug(text: str) -> str:\n"
        '    """Lower-case words joined by dashes."""\n'
        "    return '-'.join(re.findall(r'[a-z0-9]+', text.lower()))\n"
    )
    later = await gateway.execute(
        "x = 1\nfrom skills import save\n"
        "print(save(slug, tests=\"from skills import slug\\nassert slug('A b!') == 'a-b'\"))",
        session=defined["session"],
    )
    assert later["status"] == "ok", later
    skill = library(engine).store.get("-", "slug")
    assert skill.source.startswith("import re\n\ndef slug(text: str) -> str:")
    assert skill.description == "Lower-case words joined by dashes."
    text = await gateway.execute(
        "from skills import save\n"
        "print(save('def shout(t):\\n    return t.upper()\\n', name='shout',\n"
        "           description='Upper-case text', tests='from skills import shout\\n"
        'assert shout("a") == "A"\'))'
    )
    assert text["stdout"].startswith("saved skill shout (tests passed)"), text


async def test_a_skill_may_import_another_skill(engine: Codemode, gateway: Any) -> None:
    assert (await gateway.execute(SAVE))["status"] == "ok"
    code = (
        "from skills import save, first_item_with_prefix\n"
        "def shout_first(prefix: str) -> str:\n"
        '    """The first item with a prefix, in capitals."""\n'
        "    return first_item_with_prefix(prefix).upper()\n"
        "print(save(shout_first, tests='from skills import shout_first\\n"
        'assert shout_first("a") == "APPLE"\'))\n'
    )
    saved = await gateway.execute(code)
    assert saved["status"] == "ok", saved
    skill = library(engine).store.get("-", "shout_first")
    assert skill.requires == ("first_item_with_prefix",)
    assert skill.source.startswith("from skills import first_item_with_prefix\n")
    used = await gateway.execute("from skills import shout_first\nprint(shout_first('p'))")
    assert used["stdout"] == "PEAR\n", used

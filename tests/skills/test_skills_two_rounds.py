"""Saving a skill takes one call: the tests see it by name, every missing argument is named at
once, and a function defined anywhere in the code (inside try, decorated, nested) is found."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.engine import Codemode

pytestmark = pytest.mark.anyio


def library(engine: Codemode) -> Any:
    assert engine.skills is not None and engine.skills.library is not None
    return engine.skills.library


async def test_tests_use_the_bare_name_without_an_import(engine: Codemode, gateway: Any) -> None:
    code = (
        "from skills import save\n"
        "def sql_rows(text: str) -> list:\n"
        '    """Rows of a Python-literal result."""\n'
        "    import ast\n"
        "    return ast.literal_eval(text)\n"
        "print(save(sql_rows, tests=\"assert sql_rows('[(1,)]') == [(1,)]\"))\n"
    )
    saved = await gateway.execute(code)
    assert saved["status"] == "ok", saved
    assert saved["stdout"].startswith("saved skill sql_rows")
    # Importing it as well still works (and the stored tests are the ones given).
    again = code.replace('tests="', 'tests="from skills import sql_rows\\n')
    assert (await gateway.execute(again))["status"] == "ok"
    assert library(engine).store.get("-", "sql_rows").tests.startswith("from skills import")


async def test_every_missing_argument_is_named_at_once(gateway: Any) -> None:
    code = "from skills import save\ndef f(x):\n    return x\nsave(f)\n"
    failed = await gateway.execute(code)
    message = failed["error"]["message"]
    assert "description=..." in message and "tests=..." in message, failed
    assert "help(save)" in message


async def test_help_save_shows_a_complete_example(gateway: Any) -> None:
    shown = await gateway.execute("from skills import save\nhelp(save)")
    assert "print(save(slug, description=" in shown["stdout"]
    assert "tests=\"assert slug(' A b ') == 'a-b'\"" in shown["stdout"]


async def test_functions_defined_anywhere_can_be_saved(engine: Codemode, gateway: Any) -> None:
    code = (
        "import functools\n"
        "from skills import save\n"
        "try:\n"
        "    def inside_try(x: int) -> int:\n"
        '        """Add one."""\n'
        "        s = '''a\n"
        "multi-line string'''\n"
        "        return x + 1\n"
        "except Exception:\n"
        "    pass\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def decorated(x: int) -> int:\n"
        '    """Square."""\n'
        "    return x * x\n"
        "def outer():\n"
        "    def nested(x: int) -> int:\n"
        '        """Negate."""\n'
        "        return -x\n"
        "    return nested\n"
        "print(save(inside_try, tests='assert inside_try(1) == 2'))\n"
        "print(save(decorated, tests='assert decorated(3) == 9'))\n"
        "print(save(outer(), tests='assert nested(2) == -2'))\n"
    )
    saved = await gateway.execute(code)
    assert saved["status"] == "ok", saved
    assert saved["stdout"].count("saved skill") == 3
    store = library(engine).store
    assert store.get("-", "inside_try").source.startswith("def inside_try(x: int) -> int:")
    assert "import functools\n" in store.get("-", "decorated").source
    used = await gateway.execute(
        "from skills import inside_try, decorated, nested\n"
        "print(inside_try(1), decorated(4), nested(5))"
    )
    assert used["stdout"] == "2 16 -5\n", used


async def test_what_cannot_be_saved_says_why(gateway: Any) -> None:
    code = (
        "from skills import save\n"
        "def shout(f):\n"
        "    return f\n"
        "@shout\n"
        "def loud(x):\n"
        '    """Loud."""\n'
        "    return x\n"
        "def outer(n):\n"
        "    def add(x):\n"
        '        """Add n."""\n'
        "        return x + n\n"
        "    return add\n"
        "for function in (loud, outer(1)):\n"
        "    try:\n"
        "        save(function, tests='assert True')\n"
        "    except ValueError as error:\n"
        "        print(error)\n"
    )
    shown = await gateway.execute(code)
    assert "its decorator @shout is defined in this code" in shown["stdout"], shown
    assert "uses variables of the function it is defined in (n)" in shown["stdout"], shown

"""Code that runs inside the sandbox for skills: the ``skills`` package and the test runner.

Standard library only. The host serves the package on ``import skills``; each saved skill is a
submodule (``skills.<name>``) whose function ``from skills import <name>`` returns.
"""

from __future__ import annotations

__all__ = ["package_source", "save_source", "test_program"]


def package_source() -> str:
    return _PACKAGE


def save_source() -> str:
    """``skills._save``: loaded by ``save`` only, so importing a skill stays cheap."""
    return _SAVE


def test_program(tests: str) -> str:
    """The tests, then a runner that calls every ``test_*`` function and prints a tally."""
    return f"{tests}\n\n{_RUNNER}"


_PACKAGE = '''"""Your saved skills: tested functions from earlier tasks, importable by name.

    from skills import save
    def slug(text: str) -> str:
        # Lower-case words joined by dashes (a docstring becomes the description).
        return "-".join(text.lower().split())
    save(slug, tests="from skills import slug\\nassert slug(' A b ') == 'a-b'")

    from skills import slug          # in any later session of the same owner

`save(func_or_source, name=None, description=None, tests=..., shared=False)` runs the tests in
a fresh sandbox first and refuses the skill, with the failing output, when they fail. `search`
lists saved skills next to tools.
"""

import sys as _sys

__all__ = ["save"]


def save(func_or_source, name=None, description=None, tests=None, shared=False):
    """Save a function (or source text defining it) as a skill; returns a one-line summary.
    Its tests run in a fresh sandbox first; failing tests refuse it with their output."""
    from skills._save import save as _save  # loaded only when saving: imports stay cheap

    return _save(func_or_source, name, description, tests, shared)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        module = __import__(__name__ + "." + name, fromlist=[name])
    except ModuleNotFoundError as error:
        if error.name != __name__ + "." + name:
            raise
        raise ImportError(
            "no saved skill named %r: `search` lists your skills, `save` adds one" % name,
            name=__name__ + "." + name,
        ) from None
    value = getattr(module, name)
    globals()[name] = value  # the import bound the submodule here: bind the function instead
    return value
'''

_SAVE = '''"""``skills.save``: read a function's source and send it to the host."""

import sys as _sys

from servers._runtime import call_tool as _call_tool

# The guest's runtime keeps the code of the latest executions (not every host does).
_executed = getattr(_sys.modules.get("servers._runtime"), "executed", [])

__all__ = ["save"]


def save(func_or_source, name=None, description=None, tests=None, shared=False):
    """Save a function (or source text defining it) as a skill; returns a one-line summary."""
    import inspect as _inspect  # here, not at the top: importing a skill must stay cheap

    if isinstance(func_or_source, str):
        if not name:
            raise ValueError("save(source, name=...): name the function the source defines")
        source = func_or_source
    elif callable(func_or_source):
        name = name or func_or_source.__name__
        source = _source_of(func_or_source)
        if description is None:
            description = (_inspect.getdoc(func_or_source) or "").strip().split("\\n")[0]
    else:
        raise TypeError("save() takes a function or the source text that defines it")
    if not description:
        raise ValueError("save(..., description=...): say what the skill does (search shows it)")
    if not tests:
        raise ValueError(
            "save(..., tests=...): give test code (asserts or test_* functions) that imports "
            "the skill with `from skills import %s`" % name
        )
    reply = _call_tool("_skills", "save", {
        "name": name, "description": description, "source": source, "tests": tests,
        "shared": bool(shared),
    })
    return reply["summary"]


def _source_of(func):
    """The function's source: from linecache (this execution), else from the code of an
    earlier execution of this session (the guest keeps the latest ones)."""
    import inspect as _inspect
    import textwrap as _textwrap

    name = func.__name__
    heads = ("def %s(" % name, "async def %s(" % name, "class %s" % name)
    first = getattr(getattr(func, "__code__", None), "co_firstlineno", 0)
    candidates = []
    try:
        candidates.append(_inspect.getsourcelines(func)[0])
    except (OSError, TypeError):
        pass
    if first and getattr(func.__code__, "co_filename", "") == "<code>":
        for code in reversed(_executed):
            lines = code.splitlines(True)
            if first <= len(lines):
                candidates.append(_inspect.getblock(lines[first - 1:]))
    for lines in candidates:
        text = _textwrap.dedent("".join(lines))
        header = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("@")]
        if header and header[0].lstrip().startswith(heads):
            return _imports_for(func) + text
    raise ValueError(
        "cannot read the source of %s: pass the source text instead: save(source, name=%r)"
        % (name, name)
    )


def _names_used(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, type(code)):
            names |= _names_used(const)
    return names


def _imports_for(func):
    """Import lines for the modules and tools the function uses as globals."""
    code = getattr(func, "__code__", None)
    if code is None:
        return ""
    lines = []
    for used in sorted(_names_used(code)):
        value = func.__globals__.get(used)
        if isinstance(value, type(_sys)):
            module = value.__name__
            if module.startswith("servers.") and module.count(".") == 1:
                line = "from servers import " + module.split(".")[1]
                if module.split(".")[1] != used:
                    line += " as " + used
            elif module.rpartition(".")[2] == used and "." in module:
                line = "from %s import %s" % tuple(module.rsplit(".", 1))
            else:
                line = "import " + module + ("" if module == used else " as " + used)
            lines.append(line)
        elif callable(value) and str(getattr(value, "__module__", "")).startswith(
            ("servers.", "skills.")
        ) and value is not func:
            module = value.__module__
            target = value.__name__
            if module.startswith("skills."):
                module = "skills"
            line = "from %s import %s" % (module, target)
            lines.append(line if target == used else line + " as " + used)
    return "".join(line + "\\n" for line in lines) + ("\\n" if lines else "")
'''

_RUNNER = """
def __codemode_run_tests():
    import traceback

    passed = failed = 0
    for name, value in list(globals().items()):
        if name.startswith("test_") and callable(value):
            try:
                value()
            except Exception:
                failed += 1
                print("FAILED " + name)
                traceback.print_exc()
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, failed))
    if failed:
        raise SystemExit(1)


__codemode_run_tests()
"""

"""Code that runs inside the sandbox for skills: the ``skills`` package and the test runner.

Standard library only. The host serves the package on ``import skills``; each saved skill is a
submodule (``skills.<name>``) whose function ``from skills import <name>`` returns.
"""

from __future__ import annotations

import ast

__all__ = ["package_source", "save_source", "test_program"]


def package_source() -> str:
    return _PACKAGE


def save_source() -> str:
    """``skills._save``: loaded by ``save`` only, so importing a skill stays cheap."""
    return _SAVE


def test_program(tests: str, name: str) -> str:
    """The tests, with the skill bound to its name (they may import it too, or not), then a
    runner that calls every ``test_*`` function and prints a tally."""
    lines = tests.splitlines()
    at = _after_future_imports(tests)
    bound = [*lines[:at], f"from skills import {name}", *lines[at:]]
    return "\n".join(bound) + f"\n\n{_RUNNER}"


def _after_future_imports(tests: str) -> int:
    """The line after the tests' ``from __future__`` imports, which must come first."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError):
        return 0  # the sandbox reports the syntax error with its line
    at = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            at = node.end_lineno or node.lineno
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            break
    return at


_PACKAGE = '''"""Your saved skills: tested functions from earlier tasks, importable by name.

    from skills import save
    def slug(text: str) -> str:
        return "-".join(text.lower().split())
    save(slug, description="Lower-case words joined by dashes",
         tests="assert slug(' A b ') == 'a-b'")  # the tests see it as `slug`

    from skills import slug          # in any later session of the same owner

`save(func_or_source, name=None, description=None, tests=..., shared=False)` runs the tests in
a fresh sandbox first and refuses the skill, with the failing output, when they fail. `search`
lists saved skills next to tools.
"""

import sys as _sys

__all__ = ["save"]


def save(func_or_source, name=None, description=None, tests=None, shared=False):
    """Save a function (or source text defining it) as a skill; returns a one-line summary.

    Its tests run in a fresh sandbox first, where the function is already bound to its name
    (importing it is optional); failing tests refuse it with their output. Example:

        from skills import save
        def slug(text: str) -> str:
            # A docstring's first line is the description (or pass description=...).
            return "-".join(text.lower().split())
        print(save(slug, description="Lower-case words joined by dashes",
                   tests="assert slug(' A b ') == 'a-b'"))

    name: for source text, the function it defines. description: what it does (search shows
    it; default: the docstring's first line). tests: asserts or test_* functions.
    shared: offer it to other owners (after a person approves it).
    """
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

    missing = []
    if isinstance(func_or_source, str):
        source = func_or_source
        if not name:
            missing.append("name=... (the name of the function the source defines)")
    elif callable(func_or_source):
        name = name or func_or_source.__name__
        source = _source_of(func_or_source)
        if description is None:
            description = (_inspect.getdoc(func_or_source) or "").strip().split("\\n")[0]
    else:
        raise TypeError("save() takes a function or the source text that defines it")
    if not description:
        missing.append("description=... (what the skill does; search shows it)")
    if not tests:
        missing.append(
            "tests=... (asserts or test_* functions; they see the skill as `%s`)"
            % (name or "its name")
        )
    if missing:
        raise ValueError("save() needs " + "; ".join(missing) + ". help(save) shows an example")
    reply = _call_tool("_skills", "save", {
        "name": name, "description": description, "source": source, "tests": tests,
        "shared": bool(shared),
    })
    return reply["summary"]


def _source_of(func):
    """The function's source, found by name and line in the code that defined it: this
    execution's (linecache), else an earlier one of this session (the guest keeps the latest).
    Found wherever it is defined: at the top, inside ``try`` or ``if``, nested, decorated."""
    import inspect as _inspect
    import linecache as _linecache

    try:
        func = _inspect.unwrap(func)  # a decorated function: the one its decorator wrapped
    except ValueError:
        pass
    name = func.__name__
    code = getattr(func, "__code__", None)
    if code is None:
        raise TypeError("save() takes a Python function; %r is not one" % (func,))
    if code.co_freevars:
        raise ValueError(
            "cannot save %s: it uses variables of the function it is defined in (%s); define "
            "it at the top level, passing those as arguments" % (name, ", ".join(code.co_freevars))
        )
    texts = ["".join(_linecache.getlines(code.co_filename))]
    if code.co_filename == "<code>":
        texts += list(reversed(_executed))
    for text in texts:
        found = _definition(text, name, code.co_firstlineno) if text else None
        if found is not None:
            return _imports_for(func) + _decorator_imports(func, found) + found
    raise ValueError(
        "cannot read the source of %s: pass the source text instead: save(source, name=%r)"
        % (name, name)
    )


def _definition(text, name, first):
    """The dedented source of the ``def name`` (decorators included) starting at line
    ``first``, or None."""
    import ast as _ast

    try:
        tree = _ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    kinds = (_ast.FunctionDef, _ast.AsyncFunctionDef)
    for node in _ast.walk(tree):
        if isinstance(node, kinds) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first in (start, node.lineno):
                lines = text.splitlines(True)[start - 1 : node.end_lineno]
                # The indentation of its first line goes; lines of a string that start
                # further left (inside a multi-line string) stay as they are.
                margin = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
                return "".join(ln[len(margin):] if ln.startswith(margin) else ln for ln in lines)
    return None


def _decorator_imports(func, source):
    """Import lines for the modules and importable functions its decorators name; a decorator
    defined in the code itself cannot be imported by the skill: a clear error."""
    import ast as _ast
    import builtins as _builtins

    node = _ast.parse(source).body[0]
    lines = []
    for decorator in getattr(node, "decorator_list", []):
        root = decorator
        while isinstance(root, (_ast.Attribute, _ast.Call)):
            root = root.value if isinstance(root, _ast.Attribute) else root.func
        if not isinstance(root, _ast.Name):
            continue
        if root.id not in func.__globals__ and hasattr(_builtins, root.id):
            continue  # @staticmethod, @property...: nothing to import
        value = func.__globals__.get(root.id)
        module = getattr(value, "__module__", None) or ""
        if isinstance(value, type(_sys)):
            lines.append("import %s%s" % (
                value.__name__, "" if value.__name__ == root.id else " as " + root.id))
        elif module not in ("", "__main__", "builtins") and module in _sys.modules and (
            getattr(value, "__name__", "") == root.id
        ):
            lines.append("from %s import %s" % (module, root.id))
        else:
            raise ValueError(
                "cannot save %s: its decorator @%s is defined in this code, where the skill "
                "cannot import it; save the function without it, or pass source text that "
                "defines both (save(source, name=%r))" % (func.__name__, root.id, func.__name__)
            )
    return "".join(line + "\\n" for line in lines)


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

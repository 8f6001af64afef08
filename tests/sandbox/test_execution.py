"""Executions: every result field, stateful sessions, tools and imports over the bridge."""

from __future__ import annotations

import threading
from typing import Any

from codemode.bridge.host import ModuleSource, ToolAccess
from codemode.errors import ToolError
from codemode.sandbox import SandboxPool, SandboxSession
from codemode.tools import ToolCall


class Tools:
    """A host-side invoker with a few tools, recording what it was asked."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        self.calls.append(call)
        args = call.arguments
        if call.tool == "add":
            return args["a"] + args["b"]
        if call.tool == "big":
            return "x" * args["n"]
        if call.tool == "length":
            return len(args["text"])
        raise ToolError(f"no such tool: {call.tool}")


class Stubs:
    def module_source(self, fullname: str) -> ModuleSource | None:
        sources = {
            "servers": ('"""Tool servers."""\nfrom servers._runtime import ToolError\n', True),
            "servers.math": (
                "from servers._runtime import call_tool\n\n"
                "def add(a: int, b: int) -> int:\n"
                '    """Add two integers on the host."""\n'
                "    return call_tool('math', 'add', {'a': a, 'b': b})\n",
                True,
            ),
        }
        if fullname not in sources:
            return None
        source, package = sources[fullname]
        return ModuleSource(source, package, fullname.replace(".", "/") + "/__init__.py")


def test_ok_result_has_every_field(session: SandboxSession):
    result = session.execute("print('hello')\nopen('out.txt', 'w').write('x')")
    data = result.to_dict()
    assert data["status"] == "ok"
    assert data["exit_code"] == 0
    assert data["stdout"] == "hello\n"
    assert data["stderr"] == ""
    assert data["error"] is None
    assert data["files"] == {"created": ["out.txt"], "modified": [], "deleted": []}
    assert data["tool_calls"] == {"count": 0, "failures": 0, "by_tool": {}}
    assert 0 < data["duration_ms"] < 5000
    assert data["truncated"]["stdout_bytes"] == 0
    assert data["session"] == "test"
    assert data["sandbox_reset"] is False
    assert "hint" in data
    assert "limit" not in data


def test_error_reports_type_message_line_and_only_agent_frames(session: SandboxSession):
    code = "def f(x):\n    return 1 / x\n\nprint('before')\nf(0)\n"
    result = session.execute(code)
    assert result.status == "error"
    assert result.exit_code == 1
    assert result.stdout == "before\n"
    assert result.error is not None
    assert result.error["type"] == "ZeroDivisionError"
    assert result.error["message"] == "division by zero"
    assert result.error["line"] == 2
    assert "line 5" in result.error["traceback"] and "line 2, in f" in result.error["traceback"]
    assert "_codemode_guest" not in result.error["traceback"]
    assert "ZeroDivisionError" in result.stderr
    assert "line 2" in result.hint


def test_syntax_error_points_at_the_line(session: SandboxSession):
    result = session.execute("x = 1\ny = (\n")
    assert result.status == "error"
    assert result.error is not None and result.error["type"] == "SyntaxError"
    assert result.error["line"] == 2
    assert "syntax" in result.hint.lower()


def test_sys_exit_sets_the_exit_code(session: SandboxSession):
    assert session.execute("import sys; sys.exit(3)").exit_code == 3
    result = session.execute("import sys; sys.exit(0)")
    assert (result.status, result.exit_code) == ("ok", 0)


def test_variables_and_files_persist_and_fresh_clears_variables_only(session: SandboxSession):
    session.execute("counter = 41\nopen('keep.txt', 'w').write('kept')")
    assert session.execute("counter += 1\nprint(counter)").stdout == "42\n"
    fresh = session.execute("print('counter' in globals(), open('keep.txt').read())", fresh=True)
    assert fresh.stdout == "False kept\n"
    modified = session.execute("open('keep.txt', 'a').write('!')")
    assert modified.files["modified"] == ["keep.txt"]


def test_code_larger_than_the_bridge_buffer_reaches_a_stopped_guest(session: SandboxSession):
    # Between executions the guest is stopped; its code is sent before it is resumed, unless
    # the code does not fit in the socket's buffer (then it is resumed to read it).
    assert session.execute("print(1)").status == "ok"
    result = session.execute("x = '" + "a" * 3_000_000 + "'\nprint(len(x))")
    assert (result.status, result.stdout) == ("ok", "3000000\n")
    assert session.execute("print(2)").stdout == "2\n"


def test_top_level_await_runs(session: SandboxSession):
    result = session.execute("import asyncio\nawait asyncio.sleep(0)\nprint('awaited')")
    assert result.stdout == "awaited\n"


def test_stdout_tail_and_stderr_head_tail_are_clipped_with_markers(session: SandboxSession):
    code = (
        "import sys\n"
        "print('A' * 5000 + 'END')\n"
        "sys.stderr.write('S' * 300 + 'M' * 5000 + 'E' * 300)\n"
    )
    result = session.execute(code)
    assert result.stdout.endswith("END\n")
    assert "bytes omitted" in result.stdout
    assert len(result.stdout) < 1100
    assert result.truncated["stdout_bytes"] == 5004 - 1000
    assert result.stderr.startswith("S" * 300)
    assert result.stderr.endswith("E" * 300)
    assert "bytes omitted" in result.stderr
    assert result.truncated["stderr_total_bytes"] == 5600


def test_output_of_child_processes_is_captured(session: SandboxSession):
    result = session.execute("import subprocess\nsubprocess.run(['echo', 'from child'])")
    assert result.stdout == "from child\n"


def test_tools_are_called_through_the_bridge(session: SandboxSession):
    tools = Tools()
    code = (
        "from servers._runtime import call_tool, ToolError\n"
        "print(call_tool('math', 'add', {'a': 2, 'b': 3}))\n"
        "try:\n"
        "    call_tool('math', 'nope', {})\n"
        "except ToolError as error:\n"
        "    print('caught:', error)\n"
    )
    result = session.execute(code, tools=ToolAccess(tools))
    assert result.stdout == "5\ncaught: no such tool: nope\n"
    assert result.tool_calls["count"] == 2
    assert result.tool_calls["failures"] == 1
    assert result.tool_calls["by_tool"]["math.add"] == {"calls": 1, "failures": 0}
    assert tools.calls[0] == ToolCall("math", "add", {"a": 2, "b": 3})


def test_uncaught_tool_error_is_reported_with_the_tool(session: SandboxSession):
    code = "from servers._runtime import call_tool\ncall_tool('math', 'nope', {})\n"
    result = session.execute(code, tools=ToolAccess(Tools()))
    assert result.status == "error"
    assert result.error is not None
    assert (result.error["type"], result.error["line"]) == ("ToolError", 2)
    assert result.error["tool"] == "math.nope"
    assert "tool call failed" in result.hint.lower()


def test_ungranted_tool_raises_tool_error_inside(session: SandboxSession):
    tools = Tools()
    code = (
        "from servers._runtime import call_tool, ToolError\n"
        "try:\n    call_tool('math', 'add', {'a': 1, 'b': 1})\n"
        "except ToolError as e:\n    print(e.code, e)\n"
    )
    result = session.execute(code, tools=ToolAccess(tools, grant=lambda server, tool: False))
    assert result.stdout.startswith("tool_not_granted math.add is not available")
    assert tools.calls == []


def test_generated_modules_import_over_the_bridge_with_help(session: SandboxSession):
    code = (
        "from servers import math\n"
        "print(math.add(20, 22))\n"
        "import inspect\n"
        "print(inspect.signature(math.add))\n"
        "print(math.add.__doc__)\n"
        "try:\n    import servers.nothere\n"
        "except ModuleNotFoundError as e:\n    print('missing:', e)\n"
    )
    result = session.execute(code, tools=ToolAccess(Tools(), Stubs()))
    lines = result.stdout.splitlines()
    assert lines[0] == "42"
    assert lines[1] == "(a: int, b: int) -> int"
    assert lines[2] == "Add two integers on the host."
    assert lines[3].startswith("missing: No module named 'servers.nothere'. Use the search tool")


def test_ten_megabytes_pass_from_one_tool_to_another(session: SandboxSession):
    tools = Tools()
    code = (
        "from servers._runtime import call_tool\n"
        "text = call_tool('t', 'big', {'n': 10_000_000})\n"
        "print(call_tool('t', 'length', {'text': text}))\n"
    )
    result = session.execute(code, tools=ToolAccess(tools))
    assert result.stdout == "10000000\n"
    assert len(tools.calls[1].arguments["text"]) == 10_000_000


def test_a_thread_left_behind_calls_nothing_between_executions(session: SandboxSession):
    import time

    tools = Tools()
    first = session.execute(
        "import threading, time, servers._runtime as rt\n"
        "def later():\n"
        "    time.sleep(0.2)\n"
        "    rt.call_tool('math', 'add', {'a': 1, 'b': 1})\n"
        "threading.Thread(target=later).start()\n",
        tools=ToolAccess(tools),
    )
    assert first.status == "ok"
    time.sleep(0.6)  # the thread's timer expires while no execution runs
    assert tools.calls == []
    second = session.execute(
        "import time\ntime.sleep(0.5)\nprint('second')", tools=ToolAccess(tools)
    )
    # If the thread survived (frozen in between), its call belongs to this execution.
    assert second.tool_calls["count"] == len(tools.calls)


def test_two_sessions_run_concurrently_without_seeing_each_other(pool: SandboxPool):
    a, b = SandboxSession(pool, "a"), SandboxSession(pool, "b")
    try:
        a.execute("secret = 'a-only'\nopen('a.txt', 'w').write('a')")
        b.execute("open('b.txt', 'w').write('b')")
        results: dict[str, Any] = {}

        def run(name: str, session: SandboxSession) -> None:
            results[name] = session.execute(
                "import os\nprint(sorted(os.listdir('.')), 'secret' in globals(), "
                "len([p for p in os.listdir('/proc') if p.isdigit()]))"
            )

        threads = [threading.Thread(target=run, args=(n, s)) for n, s in (("a", a), ("b", b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert results["a"].stdout == "['a.txt'] True 1\n"  # only the guest, as pid 1
        assert results["b"].stdout == "['b.txt'] False 1\n"
    finally:
        a.close()
        b.close()


def test_a_timeout_resets_the_sandbox_and_the_session_recovers(session: SandboxSession):
    session.execute("x = 1")
    result = session.execute("while True: pass", timeout_s=0.5)
    assert (result.status, result.limit) == ("timeout", "wall_time")
    assert result.sandbox_reset is True
    assert "restarted" in result.hint
    after = session.execute("print('x' in globals())")
    assert after.stdout == "False\n"
    assert after.sandbox_reset is False


def test_text_rendering_is_compact_and_complete(session: SandboxSession):
    text = session.execute("print('hi')\n1/0").render_text()
    assert text.startswith("status: error, exit code 1")
    assert "stdout:\nhi" in text
    assert "error at line 2: ZeroDivisionError: division by zero" in text


def test_third_party_packages_of_the_environment_import(session: SandboxSession):
    # numpy comes with the `data` extra, which `make test` installs.
    result = session.execute("import numpy; print(numpy.arange(3).sum(), numpy.__file__)")
    total, location = result.stdout.split()
    assert total == "3"
    assert location.startswith("/run/codemode/site-")  # mounted under a neutral path


def test_tool_error_is_predefined_as_the_tool_description_promises(session: SandboxSession):
    code = (
        "from servers._runtime import call_tool\n"
        "try:\n    call_tool('math', 'nope', {})\n"
        "except ToolError as error:\n    print('caught', error)\n"
    )
    assert session.execute(code, tools=ToolAccess(Tools())).stdout == "caught no such tool: nope\n"
    assert session.execute("print('ToolError' in globals())", fresh=True).stdout == "True\n"


def test_short_output_is_shown_whole(session: SandboxSession):
    # 1.9 KB: more than the 1,000-character tail, but cutting it would cost another round.
    result = session.execute("print('x' * 1900)")
    assert result.stdout == "x" * 1900 + "\n"
    assert result.truncated["stdout_bytes"] == 0 and "bytes omitted" not in result.stdout

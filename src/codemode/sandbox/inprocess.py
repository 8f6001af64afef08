"""A test twin of the sandbox: runs code with ``exec`` in this process. NO ISOLATION.

For tests of the engine, the gateway and the CLI where user namespaces are unavailable. It
speaks to the same ``BridgeHost`` as a real sandbox (so grants, the invoker chain, late calls
and call statistics behave the same), keeps variables between executions, and imports
``servers.*`` from the same generated sources. It enforces no limit, captures only ``print``
(not writes to ``sys.stdout``), and has no workspace. Never serve untrusted code with it: the
engine uses it only when a caller passes it in explicitly.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import io
import itertools
import threading
import time
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codemode.bridge.host import NO_TOOLS, BridgeHost, ToolAccess, ToolInvoker
from codemode.errors import SandboxError, ToolError
from codemode.sandbox.result import ExecutionResult, make_hint
from codemode.sandbox.runner import OutputCallback
from codemode.tools import ToolCall

__all__ = ["InProcessSandbox", "InProcessSandboxes"]

_FILENAME = "<code>"
_HOST_ROOTS = ("servers", "skills", "state")
_NO_FILES: dict[str, list[str]] = {"created": [], "modified": [], "deleted": []}


class InProcessSandboxes:
    """A ``SandboxProvider`` of in-process twins (no isolation; tests only)."""

    has_workspace = False  # the code runs in the host process: there is nothing to serve
    isolated = False

    def __init__(self, *, default_timeout_s: float = 60.0) -> None:
        self.default_timeout_s = default_timeout_s
        self.opened: list[InProcessSandbox] = []
        self.expected = 0  # sessions announced (``expect``)

    def open(self, session_id: str) -> InProcessSandbox:
        sandbox = InProcessSandbox(session_id, self.default_timeout_s)
        self.opened.append(sandbox)
        return sandbox

    def expect(self) -> None:
        self.expected += 1  # nothing to start: counted, for tests

    def close(self) -> None:
        for sandbox in self.opened:
            sandbox.close()


class _ToolError(Exception):
    """``ToolError`` as the code sees it (the guest defines the same class)."""

    def __init__(self, message: str, *, tool: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        self.code = code


class InProcessSandbox:
    def __init__(self, session_id: str, default_timeout_s: float) -> None:
        self.id = session_id
        self.default_timeout_s = default_timeout_s
        self.executions = 0
        self.closed = False
        self._lock = threading.Lock()
        self._variables: dict[str, Any] = {}
        self._host: BridgeHost | None = None

    released = False  # the code's variables live in this process: nothing to give back

    def release(self, still_idle: Callable[[], bool] = lambda: True) -> bool:
        return False

    def lost(self) -> bool:
        return False  # it lives as long as this process

    def live_counts(self) -> tuple[int, int]:
        host = self._host
        return (host.stats.count, 0) if host is not None else (0, 0)

    def live_stdout(self) -> str:
        return ""  # a test twin: its output is not kept while it runs

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        fresh: bool = False,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        with self._lock:
            if self.closed:
                raise SandboxError("this session is closed", fix="start a new session")
            self.executions += 1
            wall = timeout_s if timeout_s is not None else self.default_timeout_s
            started = time.monotonic()
            if cancel is not None and tools.invoker is not None:
                # In-process code cannot be interrupted: after a cancel, calls are refused.
                invoker = _RefusedAfterCancel(tools.invoker, cancel)
                tools = ToolAccess(invoker=invoker, modules=tools.modules, grant=tools.grant)
            host = BridgeHost(self.executions, tools, deadline=started + wall)
            self._host = host
            if fresh:
                self._variables = {}
            out = _Passed(on_output) if on_output is not None else io.StringIO()
            modules = _Modules(host)
            self._variables["__builtins__"] = _builtins(out, modules.import_)
            self._variables.setdefault("__name__", "__main__")
            self._variables["ToolError"] = _ToolError
            exit_code, error = _run(code, self._variables)
            host.close()
            self._host = None
            cancelled = cancel is not None and cancel.is_set()
            result = ExecutionResult(
                status="cancelled" if cancelled else "ok" if error is None else "error",
                exit_code=exit_code,
                stdout=out.getvalue(),
                stderr="",
                error=error,
                files={kind: list(names) for kind, names in _NO_FILES.items()},
                tool_calls=host.stats.to_dict(),
                duration_ms=round((time.monotonic() - started) * 1000, 3),
                truncated={},
                hint="",
                session=self.id,
            )
            result.hint = make_hint(result, wall)
            return result

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._variables.clear()


class _RefusedAfterCancel:
    def __init__(self, inner: ToolInvoker, cancel: threading.Event) -> None:
        self.inner = inner
        self.cancel = cancel

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        if self.cancel.is_set():
            raise ToolError(f"{call.server}.{call.tool}: the execution was cancelled")
        return self.inner.invoke(call, timeout_s=timeout_s)


class _Passed(io.StringIO):
    """Printed text, also passed to an ``on_output`` callback as it is written."""

    def __init__(self, on_output: OutputCallback) -> None:
        super().__init__()
        self.on_output: OutputCallback | None = on_output

    def write(self, text: str) -> int:
        if self.on_output is not None:
            try:
                self.on_output("stdout", text.encode("utf-8"))
            except Exception:  # noqa: BLE001 - a failing callback is dropped, as in the runner
                self.on_output = None
        return super().write(text)


def _run(code: str, namespace: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    try:
        compiled = compile(code, _FILENAME, "exec", dont_inherit=True)
        exec(compiled, namespace)  # noqa: S102 - this twin runs code in-process by design
    except SystemExit as stop:
        status = stop.code
        return (status if isinstance(status, int) else (0 if status is None else 1)), None
    except BaseException as error:  # noqa: BLE001 - the code's error is the result
        return 1, _describe(error)
    return 0, None


def _describe(error: BaseException) -> dict[str, Any]:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == _FILENAME]
    line = getattr(error, "lineno", None) if isinstance(error, SyntaxError) else None
    if frames:
        line = frames[-1].lineno
    return {
        "type": type(error).__name__,
        "message": str(error),
        "line": line,
        "traceback": "".join(traceback.format_list(frames)),
    }


def _builtins(out: io.StringIO, import_: Callable[..., Any]) -> dict[str, Any]:
    namespace = dict(vars(builtins))

    def print_(*values: object, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        out.write((" " if sep is None else sep).join(map(str, values)))
        out.write("\n" if end is None else end)

    namespace["print"] = print_
    namespace["__import__"] = import_
    return namespace


class _Modules:
    """``servers`` and ``servers.*`` for one execution, served by the bridge host."""

    def __init__(self, host: BridgeHost) -> None:
        self.host = host
        self.ids = itertools.count(1)
        self.loaded: dict[str, types.ModuleType] = {"servers._runtime": self._runtime()}
        self.importlib = types.SimpleNamespace(import_module=self.import_module)

    def _runtime(self) -> types.ModuleType:
        module = types.ModuleType("servers._runtime")
        host, ids = self.host, self.ids

        def call_tool(server: str, tool: str, arguments: dict[str, Any]) -> Any:
            frame = {"op": "call", "id": next(ids), "exec": host.execution}
            reply = host.handle({**frame, "server": server, "tool": tool, "args": arguments})
            if reply["ok"]:
                return reply.get("value")
            error = reply.get("error") or {}
            raise _ToolError(
                str(error.get("message", "tool call failed")),
                tool=f"{server}.{tool}",
                code=error.get("code"),
            )

        def awaitable(function: Callable[..., Any]) -> Callable[..., Any]:
            # In-process calls are answered at once: the awaitable form runs them in turn.
            @functools.wraps(function)
            async def aio(*args: Any, **kwargs: Any) -> Any:
                return function(*args, **kwargs)

            return aio

        module.call_tool = call_tool  # type: ignore[attr-defined]
        module.awaitable = awaitable  # type: ignore[attr-defined]
        module.ToolError = _ToolError  # type: ignore[attr-defined]
        return module

    def import_(
        self,
        name: str,
        globals_: Mapping[str, Any] | None = None,
        locals_: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> Any:
        if name == "importlib" and not level:
            # The generated packages load submodules lazily with importlib.import_module.
            return self.importlib
        if level or name.partition(".")[0] not in _HOST_ROOTS:
            return builtins.__import__(name, globals_, locals_, fromlist or (), level)
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            self._load(".".join(parts[:depth]))
        module = self.loaded[name]
        for item in fromlist or ():
            if item != "*" and not hasattr(module, item):
                self._load(f"{name}.{item}", missing_ok=True)
        return module if fromlist else self.loaded[parts[0]]

    def import_module(self, name: str) -> Any:
        if name.partition(".")[0] not in _HOST_ROOTS:
            return importlib.import_module(name)
        self.import_(name)
        return self.loaded[name]

    def _load(self, fullname: str, *, missing_ok: bool = False) -> None:
        if fullname in self.loaded:
            return
        request = {"op": "import", "id": next(self.ids), "exec": self.host.execution}
        reply = self.host.handle({**request, "name": fullname})
        if not reply["ok"]:
            if missing_ok:
                return
            message = (reply.get("error") or {}).get("message", f"No module named {fullname!r}")
            raise ModuleNotFoundError(message, name=fullname)
        value = reply["value"]
        module = types.ModuleType(fullname)
        module.__file__ = value["filename"]
        if value["package"]:
            module.__path__ = []
        vars(module)["__builtins__"] = {**vars(builtins), "__import__": self.import_}
        self.loaded[fullname] = module
        source = compile(value["source"], value["filename"], "exec", dont_inherit=True)
        exec(source, vars(module))  # noqa: S102 - generated stub source from the host
        parent, _, child = fullname.rpartition(".")
        if parent:
            setattr(self.loaded[parent], child, module)

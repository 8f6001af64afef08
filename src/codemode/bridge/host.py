"""The host side of the bridge: answers one execution's tool calls and imports.

The bridge knows nothing of MCP. It checks that the execution may call the tool, hands the call
to a ``ToolInvoker`` and frames the answer. Policy, PII tokenization and audit are wrappers
around the ``ToolInvoker``, stacked in one place (``codemode.engine.chain``): this module stays
small.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from codemode.errors import CodemodeError, ToolError, ToolNotGrantedError
from codemode.tools import ToolCall

__all__ = [
    "ApprovalGate",
    "BridgeHost",
    "execution_clock_paused",
    "Grant",
    "ModuleProvider",
    "ModuleSource",
    "NO_TOOLS",
    "PackageProvider",
    "RefusalHook",
    "ToolAccess",
    "ToolInvoker",
    "allow_all",
]


class ToolInvoker(Protocol):
    """Runs one tool call on the host. Raises ``ToolError`` (its message goes to the code)."""

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any: ...


@dataclass(frozen=True, slots=True)
class ModuleSource:
    source: str
    is_package: bool
    filename: str


class ModuleProvider(Protocol):
    """Source of the generated ``servers.*`` modules; None when there is no such module."""

    def module_source(self, fullname: str) -> ModuleSource | None: ...


Grant = Callable[[str, str], bool]
#: Told of each call refused before it reached the invoker: the call, an error code, a message.
RefusalHook = Callable[[ToolCall, str, str], None]


class PackageProvider(Protocol):
    """Installs packages for the code on the host (``packages.install([...])`` in the code).

    Returns the reply's value: ``path`` (to add to ``sys.path`` inside the sandbox),
    ``installed`` ([name, version] pairs), ``cached`` and ``log_tail``. Raises
    ``CodemodeError`` (its message goes to the code). ``automatic`` is an import that failed:
    only packages listed by name may be installed for it.
    """

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, Any]: ...


class ApprovalGate(Protocol):
    """Where a policy wrapper sends a call that needs a human: it blocks the sandbox's tool
    call until someone (an ``Approver``, through the engine) answered; True means approved.

    The time spent waiting does not count against the execution's wall-time limit.
    """

    def request(self, call: ToolCall, *, reason: str) -> bool: ...


_current_host: contextvars.ContextVar[BridgeHost | None] = contextvars.ContextVar(
    "codemode_bridge_host", default=None
)


@contextlib.contextmanager
def execution_clock_paused() -> Iterator[None]:
    """Inside a tool call: the time spent in this block extends the execution's deadline.

    For waits on a human (approvals), which must not make the agent's code time out.
    """
    host = _current_host.get()
    started = time.monotonic()
    try:
        yield
    finally:
        if host is not None:
            host.deadline += time.monotonic() - started


def allow_all(server: str, tool: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class ToolAccess:
    """What one execution may reach through the bridge: the tools (``invoker``, usually a
    chain of wrappers), the generated modules, and which tools it was granted."""

    invoker: ToolInvoker | None = None
    modules: ModuleProvider | None = None
    grant: Grant = allow_all
    on_refused: RefusalHook | None = None
    packages: PackageProvider | None = None


NO_TOOLS = ToolAccess()


# A server's or a tool's name longer than this is refused unread: the code chooses the names,
# and each distinct one is kept (counted) on the host until the execution ends.
MAX_NAME_CHARS = 200
# Distinct tool names counted one by one; calls of any more are counted under OTHER_TOOLS.
TRACKED_NAMES = 500
OTHER_TOOLS = "(other tools)"


@dataclass
class CallStats:
    count: int = 0
    failures: int = 0
    by_tool: Counter[str] = field(default_factory=Counter)
    failed_by_tool: Counter[str] = field(default_factory=Counter)
    refused: int = 0

    def key(self, name: str) -> str:
        """The name a call is counted under: bounded however many names the code makes up."""
        if name in self.by_tool or len(self.by_tool) < TRACKED_NAMES:
            return name
        return OTHER_TOOLS

    def to_dict(self) -> dict[str, Any]:
        if not self.count and not self.refused:  # most executions call no tool
            return {"count": 0, "failures": 0, "by_tool": {}}
        return {
            "count": self.count,
            "failures": self.failures,
            # Calls of tools this execution was not granted (none: the key is left out).
            **({"refused": self.refused} if self.refused else {}),
            "by_tool": {
                name: {"calls": n, "failures": self.failed_by_tool.get(name, 0)}
                for name, n in sorted(self.by_tool.items())
            },
        }


class BridgeHost:
    """Serves the requests of one execution. After ``close()`` every request is refused."""

    def __init__(self, execution: int, tools: ToolAccess, *, deadline: float) -> None:
        self.execution = execution
        self.invoker = tools.invoker
        self.modules = tools.modules
        self.grant = tools.grant
        self.on_refused = tools.on_refused
        self.packages = tools.packages
        self.deadline = deadline
        self.stats = CallStats()
        self.closed = False
        # Awaitable calls run on worker threads at once: their counts are kept under this.
        self._stats_lock = threading.Lock()

    def close(self) -> None:
        self.closed = True

    def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Answer one request frame with a reply frame. Never raises."""
        request_id = frame.get("id")
        if not isinstance(request_id, int):
            return _error(None, "bad_frame", "a request needs an integer 'id'")
        if self.closed or frame.get("exec") != self.execution:
            message = "this execution has ended; request refused"
            if frame.get("op") == "call":
                self._refused(frame, "late_frame", message)
            return _error(request_id, "late_frame", message)
        op = frame.get("op")
        if op == "call":
            return self._call(request_id, frame)
        if op == "import":
            return self._import(request_id, frame)
        if op == "install":
            return self._install(request_id, frame)
        return _error(request_id, "bad_frame", f"unknown request {op!r}")

    def _call(self, request_id: int, frame: dict[str, Any]) -> dict[str, Any]:
        server, tool, args = frame.get("server"), frame.get("tool"), frame.get("args")
        if not isinstance(server, str) or not isinstance(tool, str) or not isinstance(args, dict):
            return _error(request_id, "bad_frame", "a call needs 'server', 'tool' and 'args'")
        if len(server) > MAX_NAME_CHARS or len(tool) > MAX_NAME_CHARS:
            return _error(
                request_id,
                "bad_frame",
                f"a server's or tool's name is at most {MAX_NAME_CHARS} characters "
                f"(got {len(server):,} and {len(tool):,}); call a tool the servers list",
            )
        name = f"{server}.{tool}"
        stats = self.stats
        with self._stats_lock:
            stats.count += 1
            stats.by_tool[stats.key(name)] += 1
        refused_here = True  # until the call is handed to the invoker
        try:
            if not self.grant(server, tool):
                with self._stats_lock:
                    stats.refused += 1
                raise ToolNotGrantedError(f"{name} is not available to this execution")
            if self.invoker is None:
                raise ToolError(f"no tools are connected, so {name} cannot be called")
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise ToolError(f"{name}: the execution ran out of time")
            token = _current_host.set(self)
            refused_here = False
            try:
                value = self.invoker.invoke(ToolCall(server, tool, args), timeout_s=remaining)
            finally:
                _current_host.reset(token)
        except CodemodeError as error:
            self._failed(name)
            if refused_here:
                self._refused(frame, error.code, error.message)
            return _error(request_id, error.code, error.message)
        except Exception as error:  # noqa: BLE001 - a broken tool must not crash the host
            self._failed(name)
            return _error(request_id, "tool_error", f"{name} failed: {type(error).__name__}")
        return {"op": "reply", "id": request_id, "ok": True, "value": value}

    def _refused(self, frame: dict[str, Any], code: str, message: str) -> None:
        if self.on_refused is None:
            return
        server, tool, args = frame.get("server"), frame.get("tool"), frame.get("args")
        call = ToolCall(
            server if isinstance(server, str) else "?",
            tool if isinstance(tool, str) else "?",
            args if isinstance(args, dict) else {},
        )
        with contextlib.suppress(Exception):  # a failing hook must not break the bridge
            self.on_refused(call, code, message)

    def _install(self, request_id: int, frame: dict[str, Any]) -> dict[str, Any]:
        names = frame.get("names")
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            return _error(request_id, "bad_frame", "an install needs 'names', a list of str")
        if self.packages is None:
            return _error(
                request_id,
                "packages_off",
                "packages cannot be installed in this sandbox ([sandbox.packages] is off); "
                "do the task with the modules that are there",
            )
        try:
            value = self.packages.install(names, automatic=frame.get("automatic") is True)
        except CodemodeError as error:
            return _error(request_id, error.code, str(error))
        except Exception as error:  # noqa: BLE001 - a broken installer must not crash the host
            return _error(request_id, "package_error", f"install failed: {type(error).__name__}")
        return {"op": "reply", "id": request_id, "ok": True, "value": value}

    def _failed(self, name: str) -> None:
        with self._stats_lock:
            self.stats.failures += 1
            self.stats.failed_by_tool[self.stats.key(name)] += 1

    def _import(self, request_id: int, frame: dict[str, Any]) -> dict[str, Any]:
        name = frame.get("name")
        if not isinstance(name, str):
            return _error(request_id, "bad_frame", "an import needs a 'name'")
        module = self.modules.module_source(name) if self.modules else None
        if module is None and name == "servers":
            module = _EMPTY_ROOT
        if module is None:
            return _error(
                request_id,
                "module_not_found",
                f"No module named {name!r}. Use the search tool to find server names.",
            )
        value = {"source": module.source, "package": module.is_package, "filename": module.filename}
        return {"op": "reply", "id": request_id, "ok": True, "value": value}


_EMPTY_ROOT = ModuleSource(
    '"""No tool servers are connected."""\nfrom servers._runtime import ToolError, call_tool\n',
    True,
    "servers/__init__.py",
)


def _error(request_id: int | None, code: str, message: str) -> dict[str, Any]:
    return {
        "op": "reply",
        "id": request_id,
        "ok": False,
        "error": {"code": code, "message": message},
    }

"""``servers._runtime`` inside the sandbox: tool calls and module imports over the bridge.

Standard library only. The host decides everything: which tools this execution may call, what
they return, and the source of every ``servers.*`` module.
"""

import importlib.machinery
import linecache
import sys
import threading
import types

from . import wire

__all__ = ["ToolError", "call_tool"]


class ToolError(Exception):
    """A tool call failed. ``str(error)`` is the upstream's message; catch it like any error."""

    def __init__(self, message, *, tool=None, code=None):
        super().__init__(message)
        self.tool = tool
        self.code = code


class _Bridge:
    def __init__(self):
        self.sock = None
        self.lock = threading.Lock()
        self.execution = 0
        self.next_id = 0

    def request(self, frame):
        with self.lock:
            self.next_id += 1
            frame["id"] = self.next_id
            frame["exec"] = self.execution
            self.sock.sendall(wire.encode_frame(frame))
            reply = wire.read_frame(self.sock)
        if reply.get("id") != frame["id"]:
            raise ToolError("bridge out of sync: the reply does not match the request")
        return reply


bridge = _Bridge()

# The code of the latest executions, newest last: ``inspect`` finds the source of a function
# defined in an earlier execution here (``linecache`` holds only the current one as <code>).
executed = []


def call_tool(server, tool, arguments):
    """Call ``server.tool`` on the host with ``arguments`` (a dict). Raises ToolError."""
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict")
    try:
        reply = bridge.request({"op": "call", "server": server, "tool": tool, "args": arguments})
    except wire.WireError as error:
        raise ToolError(f"{server}.{tool}: {error}", tool=f"{server}.{tool}") from None
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error") or {}
    raise ToolError(
        error.get("message", "tool call failed"),
        tool=f"{server}.{tool}",
        code=error.get("code"),
    )


# Top-level packages the host serves. ``servers`` is the host's alone; for the others a
# module the host does not have falls through to the ordinary import system.
_HOST_ROOTS = ("servers", "skills", "state")


class ServersFinder:
    """Imports ``servers.*``, ``skills.*`` and ``state`` from sources the host gives on demand."""

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.partition(".")[0]
        if root not in _HOST_ROOTS:
            return None
        reply = bridge.request({"op": "import", "name": fullname})
        if not reply.get("ok"):
            if root != "servers" and (reply.get("error") or {}).get("code") == "module_not_found":
                return None
            raise ModuleNotFoundError(
                (reply.get("error") or {}).get("message", f"No module named {fullname!r}"),
                name=fullname,
            )
        module = reply["value"]
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=module["filename"], is_package=module["package"]
        )
        spec.has_location = True
        spec.loader_state = module
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        state = module.__spec__.loader_state
        filename = state["filename"]
        source = state["source"]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
        if module.__name__.count(".") == 2:
            # Importing servers.x.tool rebinds servers.x.tool to the module: keep it callable.
            module.__class__ = _ToolModule


class _ToolModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


def install(sock):
    bridge.sock = sock
    runtime = sys.modules[__name__]
    sys.modules["servers._runtime"] = runtime
    sys.meta_path.insert(0, ServersFinder())

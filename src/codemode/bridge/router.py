"""``BuiltinRouter``: codemode's own servers (state, skills, checkpoints) answered on the host.

A ``ToolInvoker`` that sends calls to a built-in server to its invoker and every other call to
``inner`` (the session's chain of wrappers around the upstreams). Built-in calls never leave
the host and need no grant from the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.bridge.host import ToolInvoker
from codemode.errors import ToolError
from codemode.tools import ToolCall

__all__ = ["BuiltinRouter"]


class BuiltinRouter:
    def __init__(self, inner: ToolInvoker | None, builtins: Mapping[str, ToolInvoker]) -> None:
        self.inner = inner
        self.builtins = dict(builtins)

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        builtin = self.builtins.get(call.server)
        if builtin is not None:
            return builtin.invoke(call, timeout_s=timeout_s)
        if self.inner is None:
            name = f"{call.server}.{call.tool}"
            raise ToolError(f"no tools are connected, so {name} cannot be called")
        return self.inner.invoke(call, timeout_s=timeout_s)

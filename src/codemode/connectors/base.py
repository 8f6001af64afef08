"""The connector seam: where tools come from and where their calls go.

Every tool source (an MCP server, an OpenAPI document, Python functions) is a ``BaseConnector``.
The optional abilities are declared here as no-op methods that a source overrides when it has
them, so nobody has to probe a connector with ``getattr``.

The error contract, which every connector keeps and ``tests/connectors/test_contract.py`` checks:

- ``start()`` and ``list_tools()`` raise ``UpstreamUnavailableError`` when the source cannot be
  reached, started or listed, and ``SchemaError`` when its definitions cannot be used.
- ``call_tool()`` returns ``ToolResult(is_error=True, error_message=...)`` when the tool ran (or
  was asked to run) and reported a failure: bad arguments, an HTTP error status, an exception in
  the function, an MCP result with ``isError``. It raises ``ToolNotFoundError`` for a tool the
  source does not have, and ``UpstreamUnavailableError`` when the upstream could not be reached,
  failed, did not answer in time or is not set up to be called. Nothing else: any other exception
  is a bug in the connector.
- ``aclose()`` never raises for an upstream that is already gone.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any

from codemode.tools import ToolResult, ToolSpec

__all__ = ["BaseConnector", "BlockingCall", "Connector", "ToolsChangedCallback"]

# Called with the connector's name after its tools changed; may be a coroutine function.
ToolsChangedCallback = Callable[[str], Awaitable[None] | None]
#: A tool's call as a blocking function of its arguments (``BaseConnector.blocking_call``):
#: its result, or what is left to await on the loop (a function that returned a coroutine).
BlockingCall = Callable[[dict[str, Any]], ToolResult | Awaitable[ToolResult]]


class BaseConnector(abc.ABC):
    """One upstream tool source.

    ``name`` is the server name used in ``servers.<name>`` inside the sandbox. Subclasses
    implement ``list_tools`` and ``call_tool``; ``start``, ``aclose`` and ``on_tools_changed``
    do nothing unless the source has something to start, close or announce.
    """

    name: str

    async def start(self) -> None:  # noqa: B027 - optional ability, a no-op by default
        """Connect now rather than at the first call (a no-op for sources with no connection)."""

    @abc.abstractmethod
    async def list_tools(self) -> list[ToolSpec]:
        """Every tool the source offers now."""

    @abc.abstractmethod
    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call one tool by its upstream name (see the module docstring for errors)."""

    async def aclose(self) -> None:  # noqa: B027 - optional ability, a no-op by default
        """Release connections and child processes (a no-op for sources that hold none)."""

    def blocking_call(self, tool: str) -> BlockingCall | None:
        """``call_tool`` of ``tool`` as a plain blocking function, for a source that needs no
        event loop for it (a sync Python function): a tool call from a sandbox's thread then
        runs it on a worker thread without two hops through the loop. None (the default):
        call it through ``call_tool`` on the loop."""
        return None

    def on_tools_changed(self, callback: ToolsChangedCallback) -> None:  # noqa: B027
        """Call ``callback(self.name)`` whenever the source's tools change.

        Sources whose tools never change (a spec file, a list of functions) ignore it; a source
        that can announce changes (an MCP server's ``tools/list_changed``) overrides it.
        """


# The name the rest of codemode uses for the seam.
Connector = BaseConnector

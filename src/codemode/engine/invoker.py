"""Tool calls from the sandbox's bridge thread to the catalog on the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from codemode.catalog.catalog import Catalog
from codemode.errors import CodemodeError, ToolError
from codemode.tools import ToolCall, ToolResult

__all__ = ["CatalogInvoker", "result_value"]


def result_value(call: ToolCall, result: ToolResult) -> Any:
    """What the agent's code receives; a tool-reported failure becomes ``ToolError``."""
    if result.is_error:
        message = result.error_message or _text(result.value) or "the tool reported an error"
        raise ToolError(f"{call.server}.{call.tool}: {message}")
    return result.value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value[:2000]
    return str(value)[:2000] if value is not None else ""


class CatalogInvoker:
    """A ``ToolInvoker`` that runs ``catalog.call`` on ``loop`` and waits for it (bounded)."""

    def __init__(self, catalog: Catalog, loop: asyncio.AbstractEventLoop) -> None:
        self.catalog = catalog
        self.loop = loop

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(
            self.catalog.call(call.server, call.tool, call.arguments), self.loop
        )
        try:
            result = future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(
                f"{call.server}.{call.tool} did not answer within {timeout_s:.1f} s"
            ) from None
        except CodemodeError:
            raise
        except Exception as error:  # noqa: BLE001 - an upstream bug becomes a ToolError
            raise ToolError(f"{call.server}.{call.tool} failed: {error}"[:2000]) from None
        return result_value(call, result)

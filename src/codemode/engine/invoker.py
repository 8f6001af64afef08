"""Tool calls from the sandbox's bridge thread to the catalog on the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import os
import threading
import time
from collections.abc import Awaitable, Iterator
from typing import Any

from codemode.bridge.waiting import now_waiting
from codemode.catalog.catalog import Catalog
from codemode.cpus import take_process_cpus
from codemode.errors import CodemodeError, ToolError
from codemode.tools import ToolCall, ToolResult

__all__ = ["CatalogInvoker", "cancellable", "result_value"]

# The cancel flag of the execution running on this thread (set by ``Session.run``).
_cancel: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "codemode_execution_cancel", default=None
)
_CANCEL_POLL_S = 0.05


@contextlib.contextmanager
def cancellable(cancel: threading.Event | None) -> Iterator[None]:
    """Inside: a tool call in flight is abandoned (its upstream request cancelled) when
    ``cancel`` is set, so a cancelled execution does not wait for a slow upstream."""
    token = _cancel.set(cancel)
    try:
        yield
    finally:
        _cancel.reset(token)


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
        deadline = time.monotonic() + timeout_s
        future: concurrent.futures.Future[Any]
        blocking = self.catalog.blocking_call(call.server, call.tool)
        if blocking is not None:
            # A sync Python function: straight to a tool thread, not through the loop and
            # from there to a thread (four thread hops per call became two).
            future = _blocking_pool().submit(blocking, call.arguments)
        else:
            future = asyncio.run_coroutine_threadsafe(
                self.catalog.call(call.server, call.tool, call.arguments), self.loop
            )
        now_waiting()  # the call is out: what the wrappers deferred until now starts
        try:
            result = _wait(future, timeout_s, _cancel.get())
            if inspect.isawaitable(result):  # a sync function returned a coroutine: the loop's
                future = _on_loop(result, self.loop)
                result = _wait(future, deadline - time.monotonic(), _cancel.get())
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(
                f"{call.server}.{call.tool} did not answer within {timeout_s:.1f} s"
            ) from None
        except concurrent.futures.CancelledError:
            raise ToolError(f"{call.server}.{call.tool}: the execution was cancelled") from None
        except CodemodeError:
            raise
        except Exception as error:  # noqa: BLE001 - an upstream bug becomes a ToolError
            raise ToolError(f"{call.server}.{call.tool} failed: {error}"[:2000]) from None
        return result_value(call, result)


def _on_loop(
    awaitable: Awaitable[ToolResult], loop: asyncio.AbstractEventLoop
) -> concurrent.futures.Future[ToolResult]:
    async def awaited() -> ToolResult:
        return await awaitable

    return asyncio.run_coroutine_threadsafe(awaited(), loop)


@functools.cache
def _blocking_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Where blocking tool functions run: as many at once as ``asyncio.to_thread`` allows."""
    workers = min(32, (os.cpu_count() or 1) + 4)
    return concurrent.futures.ThreadPoolExecutor(
        workers, thread_name_prefix="codemode-tool", initializer=take_process_cpus
    )


def _wait(
    future: concurrent.futures.Future[Any], timeout_s: float, cancel: threading.Event | None
) -> Any:
    if cancel is None:
        return future.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        if cancel.is_set():
            future.cancel()
            raise concurrent.futures.CancelledError
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise concurrent.futures.TimeoutError
        try:
            return future.result(timeout=min(remaining, _CANCEL_POLL_S))
        except concurrent.futures.TimeoutError:
            continue

"""Run the gateway: start the engine, then serve MCP over stdio or streamable HTTP."""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio

from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.gateway.auth import (
    BearerAuth,
    ResourceMetadata,
    TokenTable,
    Verifier,
    resolve_tokens,
)
from codemode.gateway.disconnects import Disconnects, DisconnectWatch
from codemode.gateway.guard import EnvelopeGuard, guard_stdio
from codemode.gateway.server import build_server
from codemode.gateway.web.app import ApprovalPages, WebPage, with_web_pages
from codemode.gateway.web.console import OperatorConsole
from codemode.gateway.web.ledger import TokenLedger, definition_tokens
from codemode.gateway.web.links import ApprovalLinks
from codemode.heap import (
    freeze_startup_objects,
    keep_large_blocks_in_heap,
    limit_arenas,
    space_out_full_collections,
    trim_heap,
)
from codemode.sandbox.descriptors import raise_open_files_limit
from codemode.sdk_compat import uvicorn_server
from codemode.storage.private import restrict_umask

__all__ = ["serve"]

log = logging.getLogger(__name__)
Transport = Literal["stdio", "http"]
# How often a stdio gateway checks that its client (its parent process) still lives.
_ORPHAN_CHECK_S = 0.25


async def serve(
    config: CodemodeConfig,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    openapi_specs: Sequence[Path] = (),
    tokens: Sequence[str] = (),
    insecure_allow_anonymous: bool = False,
) -> None:
    """Serve until SIGTERM/SIGINT. Over HTTP every request needs a bearer token (``tokens``,
    config or ``CODEMODE_TOKENS``; else one is generated and printed; or an OAuth access token
    with ``[gateway.oauth]``) unless ``insecure_allow_anonymous``. Serving owns the process:
    what it and its children create is its owner's only (a private umask, restored after)."""
    previous = restrict_umask()
    limit_arenas()  # before the threads that would each take one
    keep_large_blocks_in_heap()
    raise_open_files_limit()
    thresholds = space_out_full_collections()
    try:
        await _serve(config, transport, host, port, openapi_specs, tokens, insecure_allow_anonymous)
    finally:
        os.umask(previous)
        gc.set_threshold(*thresholds)


async def _serve(
    config: CodemodeConfig,
    transport: Transport,
    host: str,
    port: int,
    openapi_specs: Sequence[Path],
    tokens: Sequence[str],
    insecure_allow_anonymous: bool,
) -> None:
    names = ", ".join(config.servers) or "none"
    print(f"codemode: starting tool servers ({names}) and sandboxes...", file=sys.stderr)
    async with Codemode(config, openapi_specs=openapi_specs) as engine:
        failures = engine.catalog.failures
        tools = len(engine.catalog.specs())
        print(
            f"codemode: {tools} tools ready"
            + (f"; unavailable: {', '.join(failures)}" if failures else ""),
            file=sys.stderr,
        )
        disconnects = Disconnects()
        # The approval page (MCP elicitation, URL mode) lives beside /mcp on HTTP gateways.
        public = config.gateway.public_url or f"http://{host}:{port}"
        links = ApprovalLinks(public) if transport == "http" else None
        # The ledger feeds the operator console only, served over HTTP with tokens.
        console = transport == "http" and not insecure_allow_anonymous
        ledger = TokenLedger(lambda: definition_tokens(engine)) if console else None
        server = build_server(
            engine,
            sole_client="stdio" if transport == "stdio" else None,
            disconnects=disconnects,
            links=links,
            ledger=ledger,
        )
        # SIGTERM and SIGINT end serving gracefully, so the engine stops every sandbox and
        # upstream on the way out (the default action would kill the process first).
        async with anyio.create_task_group() as group:
            group.start_soon(_build_index, engine)
            if transport == "stdio":
                from mcp.server.stdio import stdio_server

                group.start_soon(_stop_on_signal, group.cancel_scope.cancel)
                if (parent := os.getppid()) != 1:
                    group.start_soon(_stop_when_orphaned, group.cancel_scope.cancel, parent)
                with _cancellable_stdin() as stdin:
                    async with (
                        stdio_server(stdin=stdin) as (read_stream, write_stream),
                        guard_stdio(read_stream, write_stream) as guarded,
                    ):
                        await server.run(
                            guarded, write_stream, server.create_initialization_options()
                        )
            else:
                import uvicorn

                app: Any = EnvelopeGuard(
                    DisconnectWatch(server.streamable_http_app(host=host), disconnects)
                )
                pages: list[WebPage] = []
                if links is not None:
                    pages.append(ApprovalPages(links))
                if insecure_allow_anonymous:
                    _warn_anonymous(host, port)
                else:
                    app, table = _authenticated(app, config, tokens)
                    if config.gateway.shared_store and len(table):
                        group.start_soon(_publish_token_set, config, table)
                    # The console checks the same tokens (no console without them).
                    if ledger is not None:
                        operators = config.gateway.operators
                        pages.append(OperatorConsole(engine, app.verifiers, operators, ledger))
                app = with_web_pages(app, *pages)
                print(f"codemode: serving MCP on http://{host}:{port}/mcp", file=sys.stderr)
                # uvicorn would re-raise the signal after its shutdown, killing the process
                # before the engine cleans up: we watch the signals instead.
                uv = uvicorn_server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
                group.start_soon(_stop_on_signal, lambda: setattr(uv, "should_exit", True))
                await uv.serve()
            group.cancel_scope.cancel()


async def _build_index(engine: Codemode) -> None:
    """Build the search index now, so the first search does not wait (it answers lexically
    until the index is ready)."""
    from codemode.search.progress import StageLines

    started = time.monotonic()
    print("codemode: building the search index in the background...", file=sys.stderr)
    engine.index_progress = StageLines()
    try:
        await engine.build_search_index()
    except Exception:
        log.exception("building the search index failed")
        return
    took = time.monotonic() - started
    print(f"codemode: search index ready ({took:.1f} s)", file=sys.stderr)
    # What building allocated and freed stays in malloc's arenas otherwise; what start-up
    # made to stay is kept out of later collections.
    freeze_startup_objects()
    await anyio.to_thread.run_sync(trim_heap)


async def _publish_token_set(config: CodemodeConfig, table: TokenTable) -> None:
    """While serving, keep this replica's token-set fingerprint in the shared store, so
    ``codemode doctor`` can tell whether the replicas accept the same tokens."""
    from codemode.errors import StateStoreError
    from codemode.replicas.connection import SharedRedis
    from codemode.replicas.tokens import TokenSetBeacon, token_set_fingerprint

    url = config.gateway.shared_store
    assert url is not None
    lease_s = config.gateway.session_lease_s
    try:
        redis = await anyio.to_thread.run_sync(SharedRedis, url)
    except StateStoreError as error:
        log.warning("could not publish this replica's token set: %s", error)
        return
    fingerprint = await anyio.to_thread.run_sync(token_set_fingerprint, table.entries)
    beacon = TokenSetBeacon(redis, fingerprint)
    try:
        while True:
            try:
                await anyio.to_thread.run_sync(beacon.renew, lease_s * 3)
            except StateStoreError as error:
                log.warning("could not renew this replica's token set: %s", error)
            await anyio.sleep(lease_s)
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(StateStoreError):
                await anyio.to_thread.run_sync(beacon.withdraw)
            redis.close()


def _authenticated(
    app: Any, config: CodemodeConfig, flags: Sequence[str]
) -> tuple[BearerAuth, TokenTable]:
    """``app`` behind the bearer check (static tokens and, when configured, OAuth), and the
    static tokens."""
    oauth = config.gateway.oauth
    table = resolve_tokens(config.gateway.tokens, os.environ, flags, generate=oauth is None)
    verifiers: list[Verifier] = [table.verify] if len(table) else []
    metadata = None
    if oauth is not None:
        from codemode.gateway import oauth as resource_server

        verifiers.append(resource_server.IntrospectionVerifier(oauth))
        metadata = ResourceMetadata(
            resource_server.metadata_path(oauth.resource),
            resource_server.metadata_url(oauth.resource),
            resource_server.protected_resource_metadata(oauth),
        )
        print(
            f"codemode: accepting OAuth access tokens from {oauth.issuer} for {oauth.resource}",
            file=sys.stderr,
        )
    if table.generated is not None:
        print(
            "codemode: HTTP clients must send `Authorization: Bearer "
            f"{table.generated}` (generated for this run; set gateway.tokens or "
            "CODEMODE_TOKENS to choose tokens)",
            file=sys.stderr,
        )
        if config.gateway.shared_store:
            print(
                "codemode: warning: this replica generated its own token, so every other "
                "replica's clients get 401 here; give every replica the same --token-file "
                "(or gateway.tokens, CODEMODE_TOKENS)",
                file=sys.stderr,
            )
    elif len(table):
        print(
            f"codemode: HTTP clients must send one of {len(table)} bearer token(s)", file=sys.stderr
        )
    return BearerAuth(app, verifiers, metadata=metadata), table


def _warn_anonymous(host: str, port: int) -> None:
    print(
        f"codemode: WARNING: --insecure-allow-anonymous: anyone who can reach {host}:{port} "
        "can run code and use every configured tool, as you",
        file=sys.stderr,
    )


async def _stop_on_signal(stop: Callable[[], object]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            print("codemode: stopping", file=sys.stderr)
            stop()
            return


async def _stop_when_orphaned(stop: Callable[[], object], parent: int) -> None:
    """A stdio gateway whose client (its parent) died stops, even while something else
    (the client's own children) keeps its stdin open; stdin's end stops it anyway."""
    while os.getppid() == parent:
        await anyio.sleep(_ORPHAN_CHECK_S)
    print("codemode: the client's process ended; stopping", file=sys.stderr)
    stop()


class _StdinLines(anyio.AsyncFile[str]):
    """Lines of a descriptor, read without a worker thread: cancelling (SIGTERM) ends the
    read at once. The SDK's reader blocks a thread in ``readline``, and a cancelled task
    group waits for that thread, so a gateway whose client kept stdin open never exited."""

    def __init__(self, fd: int) -> None:
        super().__init__(io.StringIO())
        self._fd = fd
        mode = os.fstat(fd).st_mode
        # epoll watches pipes, sockets and terminals; reading a file or /dev/null never blocks.
        self._pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)

    async def __aiter__(self) -> AsyncIterator[str]:
        pending = bytearray()
        while True:
            if self._pollable:
                await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line = bytes(pending[: end + 1])
                del pending[: end + 1]
                yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")


@contextlib.contextmanager
def _cancellable_stdin() -> Iterator[_StdinLines]:
    """The wire's stdin on a private non-blocking descriptor; fd 0 reads /dev/null meanwhile
    (as the SDK does), so handlers and children never read the client's messages."""
    wire = os.dup(0)
    os.set_blocking(wire, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield _StdinLines(wire)
    finally:
        os.set_blocking(wire, True)  # the description may be shared (a terminal)
        os.dup2(wire, 0)
        os.close(wire)

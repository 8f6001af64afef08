"""One connection through the egress proxy: read the request, check it, connect, relay.

``CONNECT host:port`` becomes a tunnel: whatever follows the request's head (a TLS hello, or a
second ``CONNECT`` smuggled behind the first) is tunnel data for the checked address, never
read as another request. A plain-HTTP request (an absolute ``http://`` URL) is forwarded once
with ``Connection: close``; the connection then carries nothing to any other place.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from codemode.egress.heads import (
    MAX_HEAD_BYTES,
    RequestHead,
    Target,
    forwarded_request,
    parse_request_head,
    refusal_response,
    request_target,
    rewrite_response_head,
)
from codemode.egress.records import ConnectionRecord, Outcome, Resolver
from codemode.egress.rules import EgressRules, Refusal, authority

__all__ = ["HEAD_TIMEOUT_S", "Connection", "Policy", "linger"]

# The code must send a request's head within this long after connecting.
HEAD_TIMEOUT_S = 30.0
_CHUNK = 64 * 1024
# What a refused connection may still send (dropped) before it is closed.
_LINGER_S = 2.0
_LINGER_BYTES = 16 * 1024 * 1024
_ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


@dataclass(frozen=True, slots=True)
class Policy:
    rules: EgressRules
    resolver: Resolver
    connect_timeout_s: float


class Connection:
    """Serves one accepted connection; ``record()`` says what happened (also if cancelled)."""

    def __init__(self, policy: Policy, session: str) -> None:
        self.policy = policy
        self.session = session
        self.arrived = time.time()
        self.started = time.monotonic()
        self.method = ""
        self.target: Target | None = None
        self.address: str | None = None
        self.outcome: Outcome = "ok"
        self.error_code: str | None = None
        self.reason = ""
        self.sent = 0
        self.received = 0

    def record(self) -> ConnectionRecord | None:
        """What happened; None only while nothing has been read yet (a cancelled serve)."""
        if not self.method and self.error_code is None:
            return None
        target = self.target
        return ConnectionRecord(
            time=self.arrived,
            session=self.session,
            method=self.method,
            host=target.host if target else "",
            port=target.port if target else 0,
            address=self.address,
            outcome=self.outcome,
            sent=self.sent,
            received=self.received,
            duration_ms=(time.monotonic() - self.started) * 1000,
            error_code=self.error_code,
            reason=self.reason,
        )

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass  # either side went away: the relay ends
        finally:
            writer.close()  # not awaited: the transport closes on the loop's next turn

    async def _refuse(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        refusal: Refusal,
        outcome: Outcome = "denied",
    ) -> None:
        self.outcome, self.error_code, self.reason = outcome, refusal.code, refusal.reason
        writer.write(refusal_response(refusal))
        await writer.drain()
        await linger(reader, writer)

    def _incomplete(self, sent: int, what: str) -> None:
        """A connection that never made a request is recorded too (probes, scans, slow
        clients): as an error, with the bytes it did send."""
        self.outcome, self.error_code = "error", "egress_incomplete_request"
        self.reason, self.sent = f"the connection {what}", sent

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT_S):  # (no task of its own, unlike wait_for)
                data = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.LimitOverrunError, ValueError):
            too_large = Refusal(
                431, f"the request head is over {MAX_HEAD_BYTES} bytes", "egress_head_too_large"
            )
            return await self._refuse(reader, writer, too_large)
        except asyncio.IncompleteReadError as error:
            return self._incomplete(len(error.partial), "closed before a whole request head")
        except TimeoutError:
            return self._incomplete(0, f"sent no whole request head in {HEAD_TIMEOUT_S:g} s")
        head = parse_request_head(data)
        if isinstance(head, Refusal):
            return await self._refuse(reader, writer, head)
        self.method = head.method
        target = request_target(head)
        if isinstance(target, Refusal):
            return await self._refuse(reader, writer, target)
        self.target = target
        refusal = self.policy.rules.check_destination(target.host, target.port)
        if refusal is not None:
            return await self._refuse(reader, writer, refusal)
        upstream = await self._connect(reader, writer, target)
        if upstream is None:
            return None
        up_reader, up_writer = upstream
        try:
            if head.method == "CONNECT":
                writer.write(_ESTABLISHED)
                await asyncio.gather(
                    _pump(reader, up_writer, self._add_sent),
                    _pump(up_reader, writer, self._add_received),
                )
            else:
                request = forwarded_request(head, target)
                up_writer.write(request)
                self.sent += len(request)
                if not _has_body(head):  # the common GET: nothing more to forward
                    await self._relay_response(reader, up_reader, writer)
                    return None
                upload = asyncio.ensure_future(_pump(reader, up_writer, self._add_sent))
                try:
                    await self._relay_response(reader, up_reader, writer)
                finally:
                    upload.cancel()
        finally:
            up_writer.close()

    async def _connect(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: Target
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Resolve on the host, check the address, connect to that very address."""
        policy, where = self.policy, authority(target.host, target.port)
        try:
            async with asyncio.timeout(policy.connect_timeout_s):
                addresses = await policy.resolver.resolve(target.host, target.port)
                picked = policy.rules.pick(target.host, target.port, addresses)
                if isinstance(picked, Refusal):
                    self.address = str(addresses[0]) if addresses else None
                    outcome: Outcome = "denied" if picked.status == 403 else "error"
                    await self._refuse(reader, writer, picked, outcome)
                    return None
                self.address = str(picked)
                # An IP literal: asyncio connects without resolving anything again.
                return await asyncio.open_connection(
                    self.address, target.port, limit=MAX_HEAD_BYTES
                )
        except (OSError, TimeoutError) as error:
            why = "timed out" if isinstance(error, TimeoutError) else error.strerror or str(error)
            refusal = Refusal(
                502,
                f"could not connect to {where} ({self.address or 'unresolved'}): {why}",
                "egress_unreachable",
            )
            await self._refuse(reader, writer, refusal, "error")
            return None

    async def _relay_response(
        self,
        reader: asyncio.StreamReader,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        while True:
            try:
                data = await up_reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                data = b""
            rewritten = rewrite_response_head(data) if data else None
            if rewritten is None:
                where = authority(self.target.host, self.target.port) if self.target else "?"
                refusal = Refusal(
                    502, f"{where} did not answer with HTTP/1.x", "egress_bad_upstream"
                )
                await self._refuse(reader, writer, refusal, "error")
                return
            head, interim = rewritten
            writer.write(head)
            self.received += len(data)
            if not interim:
                break
        await _pump(up_reader, writer, self._add_received)

    def _add_sent(self, count: int) -> None:
        self.sent += count

    def _add_received(self, count: int) -> None:
        self.received += count


async def _pump(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, count: Callable[[int], None]
) -> None:
    """Copy until ``source`` ends, then half-close ``sink`` (the other way may go on)."""
    try:
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            count(len(chunk))
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.close()


async def linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After a refusal: end the answer, then read and drop what the code still sends, within
    bounds. Closing a Unix socket with unread input resets it, and the code would see
    "connection reset" instead of the refusal."""
    if writer.can_write_eof():
        writer.write_eof()
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(_LINGER_S):
            dropped = 0
            while dropped < _LINGER_BYTES and (chunk := await reader.read(_CHUNK)):
                dropped += len(chunk)


def _has_body(head: RequestHead) -> bool:
    lengths = head.header("content-length")
    return bool(head.header("transfer-encoding")) or any(value != "0" for value in lengths)

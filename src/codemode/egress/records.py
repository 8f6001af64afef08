"""The proxy's two seams: what it reports per connection, and how it resolves names."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from codemode.hostnames import IPAddress

__all__ = [
    "ConnectionRecord",
    "RecordSink",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
]

Outcome = Literal["ok", "error", "denied"]


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """One connection through the proxy, reported when it ends."""

    time: float  # epoch seconds, when the connection arrived
    session: str
    method: str  # CONNECT, GET, POST... ("" when no request line was read)
    host: str
    port: int
    address: str | None  # the address checked: connected to, or refused (None: neither)
    outcome: Outcome  # ok, error (admitted but failed), denied (refused by the rules)
    sent: int  # bytes from the code to the upstream
    received: int  # bytes from the upstream to the code
    duration_ms: float
    error_code: str | None = None
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.outcome != "denied"


RecordSink = Callable[[ConnectionRecord], None]


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        """The addresses of ``host`` (an IP literal is its own address); [] if none."""
        ...


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class SystemResolver:
    """The host's resolver (``getaddrinfo``, in the event loop's thread pool)."""

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        literal = _literal(host)
        if literal is not None:
            return [literal]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return []
        found: list[IPAddress] = []
        for family, _, _, _, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
                if address not in found:
                    found.append(address)
        return found


class StaticResolver:
    """In-memory twin: a fixed table of names (tests, and hosts pinned by the operator)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {
            name: [ipaddress.ip_address(a) for a in addrs] for name, addrs in table.items()
        }

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        literal = _literal(host)
        return [literal] if literal is not None else list(self.table.get(host, []))

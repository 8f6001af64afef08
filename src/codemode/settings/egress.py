"""``[sandbox.network]``: which hosts the code may reach through the egress proxy.

No network unless ``allow`` lists ``"host:port"`` pairs. Addresses in private, loopback,
link-local, multicast and other non-global ranges are refused even for a listed host, unless
``allow_private`` lists a range (CIDR) that holds them.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import BeforeValidator, Field

from codemode.config_model import (
    ConfigModel,
    Hint,
    PositiveNumber,
    PositiveWholeNumber,
    invalid,
    show_value,
)
from codemode.hostnames import normal_host, split_destination

__all__ = ["NetworkSettings"]


def _destination(value: object) -> str:
    if not isinstance(value, str):
        raise invalid(
            f"must be a 'host:port' string, not {show_value(value)}",
            'write allow = ["api.example.com:443"]',
        )
    parsed = split_destination(value)
    if parsed is None:
        raise invalid(
            f"{value!r} is not 'host:port' (a host name or IP address and a port 1-65535)",
            'write "api.example.com:443", "10.1.2.3:8080" or "[2001:db8::1]:443"',
        )
    host, port = parsed
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _network(value: object) -> str:
    try:
        return str(ipaddress.ip_network(str(value), strict=False))
    except ValueError:
        raise invalid(
            f"{show_value(value)} is not an address range (CIDR)",
            'write allow_private = ["10.0.0.0/8"] (or one address, "10.1.2.3/32")',
        ) from None


Destination = Annotated[str, BeforeValidator(_destination)]
Network = Annotated[str, BeforeValidator(_network)]


class NetworkSettings(ConfigModel):
    """``allow``: ``"host:port"`` pairs the code may connect to (names matched exactly, case
    aside). ``allow_private``: ranges a listed host may resolve into although not global."""

    allow: Annotated[
        tuple[Destination, ...],
        Hint(expects="a list of 'host:port' strings", fix='write allow = ["pypi.org:443"]'),
    ] = ()
    allow_private: Annotated[
        tuple[Network, ...],
        Hint(expects="a list of address ranges", fix='write allow_private = ["10.0.0.0/8"]'),
    ] = ()
    # Connecting to a listed host (name resolution included) gives up after this long.
    connect_timeout_s: PositiveNumber = 10.0
    # Connections one sandbox may hold open through the proxy at once.
    max_connections: Annotated[PositiveWholeNumber, Field(le=4096)] = 64

    @property
    def enabled(self) -> bool:
        return bool(self.allow)

    def destinations(self) -> frozenset[tuple[str, int]]:
        """``allow`` as ``(normalized host, port)`` pairs."""
        found = set()
        for entry in self.allow:
            parsed = split_destination(entry)
            assert parsed is not None  # validated
            found.add((normal_host(parsed[0]), parsed[1]))
        return frozenset(found)

"""What the egress proxy admits: listed ``host:port`` pairs, at addresses the config allows.

A refusal is a ``Refusal``: the HTTP status the proxy answers with, one line that says what
was refused and what to add to the config, and a stable code for the audit log.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from codemode.hostnames import IPAddress, is_public, normal_host
from codemode.settings.egress import NetworkSettings

__all__ = ["EgressRules", "Refusal", "authority"]


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    reason: str  # one line: what was refused, and the fix
    code: str  # for the audit log, e.g. "egress_not_listed"


def authority(host: str, port: int) -> str:
    """``host:port`` as written in a URL (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class EgressRules:
    def __init__(self, settings: NetworkSettings) -> None:
        self.destinations = settings.destinations()
        self.private = tuple(ipaddress.ip_network(text) for text in settings.allow_private)

    def check_destination(self, host: str, port: int) -> Refusal | None:
        """Refused unless ``host:port`` is listed in ``allow``."""
        if (normal_host(host), port) in self.destinations:
            return None
        where = authority(normal_host(host), port)
        return Refusal(
            403,
            f'{where} is not in [sandbox.network] allow; to reach it, add "{where}" to '
            "allow in the [sandbox.network] section of the codemode config",
            "egress_not_listed",
        )

    def address_allowed(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.private):
            return True
        return is_public(address)

    def pick(self, host: str, port: int, addresses: Sequence[IPAddress]) -> IPAddress | Refusal:
        """The first resolved address the config allows, or why none is."""
        for address in addresses:
            if self.address_allowed(address):
                return address
        if not addresses:
            return Refusal(502, f"{host} did not resolve to any address", "egress_unresolved")
        first = addresses[0]
        return Refusal(
            403,
            f"{authority(host, port)} resolves to {first}, a private, loopback or link-local "
            f"address that [sandbox.network] allow_private does not list; to reach it, add a "
            f'range holding it (e.g. "{first}/{first.max_prefixlen}") to allow_private',
            "egress_private_address",
        )

"""Host names, ports and addresses as the egress proxy compares them."""

from __future__ import annotations

import ipaddress
import re

__all__ = ["IPAddress", "is_public", "normal_host", "split_destination"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_MAX_NAME = 253


def normal_host(host: str) -> str:
    """A host as compared with ``allow``: lower case, no trailing dot, IPs in canonical form."""
    host = host.strip().lower().removesuffix(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    if not host or len(host) > _MAX_NAME:
        return False
    return all(_LABEL.fullmatch(label) for label in host.split("."))


def split_destination(text: str) -> tuple[str, int] | None:
    """``"host:port"`` (``"[v6]:port"`` for IPv6) as ``(host, port)``; None if malformed."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] != ":":
            return None
        host, port_text = text[1:end], text[end + 2 :]
        if ":" not in host:
            return None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or ":" in host:
            return None
    host = normal_host(host)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536 or not _valid_host(host):
        return None
    return host, int(port_text)


def is_public(address: IPAddress) -> bool:
    """Whether an address is globally routable: not private, loopback, link-local, multicast,
    shared (CGNAT), reserved or unspecified. An IPv4-mapped IPv6 address is judged as IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast

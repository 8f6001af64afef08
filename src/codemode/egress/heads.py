"""HTTP/1.x message heads as the egress proxy reads and rewrites them.

A request head is parsed strictly (CRLF line ends, token names, no folded or control
characters, at most ``MAX_HEADERS`` headers in ``MAX_HEAD_BYTES``); anything else is refused,
never guessed at. A plain-HTTP request is forwarded in origin form with ``Host`` set to the
URL's authority and ``Connection: close``: one request per proxy connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from codemode.egress.rules import Refusal, authority
from codemode.hostnames import normal_host, split_destination

__all__ = [
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "RequestHead",
    "Target",
    "forwarded_request",
    "parse_request_head",
    "refusal_response",
    "request_target",
    "rewrite_response_head",
]

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Headers about the connection to the proxy, never forwarded (RFC 9110 7.6.1).
_HOP_BY_HOP = frozenset(
    {"connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate"}
    | {"te", "trailer", "upgrade", "host"}
)
_RESPONSE_HOP = frozenset({"connection", "proxy-connection", "keep-alive"})


@dataclass(frozen=True, slots=True)
class RequestHead:
    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    path: str  # origin form for plain HTTP; "" for CONNECT


def _bad(what: str) -> Refusal:
    return Refusal(400, f"malformed proxy request: {what}", "egress_bad_request")


def parse_request_head(data: bytes) -> RequestHead | Refusal:
    """``data``: everything up to and including the blank line that ends the head."""
    text = data.decode("latin-1")
    if not text.endswith("\r\n\r\n"):
        return _bad("the head does not end with a blank line")
    lines = text[:-4].split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]):
        return _bad("the request line is not 'METHOD target HTTP/1.1'")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        return _bad(f"version {version[:20]!r} (HTTP/1.0 and HTTP/1.1 only)")
    if not target or any(ord(char) < 33 or ord(char) == 127 for char in target):
        return _bad("the target holds spaces or control characters")
    if len(lines) - 1 > MAX_HEADERS:
        return Refusal(431, f"more than {MAX_HEADERS} headers", "egress_head_too_large")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            return _bad("a header line is not 'Name: value' (folded lines are refused)")
        value = value.strip(" \t")
        if _CONTROL.search(value):
            return _bad(f"header {name!r} holds control characters")
        headers.append((name, value))
    return RequestHead(method.upper(), target, version, tuple(headers))


def request_target(head: RequestHead) -> Target | Refusal:
    """Where the request goes: CONNECT's ``host:port`` or an absolute ``http://`` URL's
    authority; a ``Host`` header naming anything else is refused (no domain fronting)."""
    if head.method == "CONNECT":
        parsed = split_destination(head.target)
        if parsed is None:
            return _bad("CONNECT needs 'host:port'")
        target = Target(parsed[0], parsed[1], "")
    else:
        found = _absolute_url(head.target)
        if isinstance(found, Refusal):
            return found
        target = found
    hosts = head.header("host")
    if len(hosts) > 1:
        return _bad("more than one Host header")
    if hosts:
        default_port = target.port if head.method == "CONNECT" else 80
        named = split_destination(hosts[0]) or split_destination(f"{hosts[0]}:{default_port}")
        if named != (target.host, target.port):
            return _bad(
                f"the Host header names {hosts[0][:100]!r} but the request goes to "
                f"{authority(target.host, target.port)}; send both to the same host"
            )
    return target


def _absolute_url(text: str) -> Target | Refusal:
    if not text.lower().startswith("http://"):
        if text.lower().startswith("https://"):
            return _bad("https:// URLs go through CONNECT (the proxy does not originate TLS)")
        return _bad("a proxy request names an absolute http:// URL")
    try:
        parts = urlsplit(text)
        port = parts.port or 80
    except ValueError:
        return _bad("the URL's port is not a number from 1 to 65535")
    if "@" in parts.netloc:
        return _bad("credentials in the URL are refused")
    host = normal_host(parts.hostname or "")
    if split_destination(authority(host, port)) is None:
        return _bad("the URL names no valid host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(host, port, path)


def forwarded_request(head: RequestHead, target: Target) -> bytes:
    """The request as the upstream gets it: origin form, its own Host, one request only."""
    listed = {
        name.strip().lower() for value in head.header("connection") for name in value.split(",")
    }
    lines = [f"{head.method} {target.path} {head.version}"]
    lines += [
        f"{name}: {value}"
        for name, value in head.headers
        if name.lower() not in _HOP_BY_HOP and name.lower() not in listed
    ]
    host = authority(target.host, target.port)
    if target.port == 80:
        host = host.removesuffix(":80")
    lines += [f"Host: {host}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def rewrite_response_head(data: bytes) -> tuple[bytes, bool] | None:
    """The upstream's response head with ``Connection: close`` (the proxy connection carries
    one request), and whether it was an interim (1xx) head; None if it is not HTTP."""
    text = data.decode("latin-1")
    lines = text[:-4].split("\r\n") if text.endswith("\r\n\r\n") else []
    if not lines or not re.fullmatch(r"HTTP/1\.[01] \d{3}( .*)?", lines[0]):
        return None
    status = int(lines[0][9:12])
    if 100 <= status < 200:
        return data, True
    kept = [
        line for line in lines[1:] if line.partition(":")[0].strip().lower() not in _RESPONSE_HOP
    ]
    return "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1"), False


def refusal_response(refusal: Refusal) -> bytes:
    """The proxy's own answer. Clients show the reason phrase (a refused CONNECT's body is
    never read), so it carries the whole message; the body repeats it."""
    phrase = refusal.reason.encode("ascii", "replace").decode("ascii")
    body = f"codemode egress proxy: {refusal.reason}\n".encode()
    head = (
        f"HTTP/1.1 {refusal.status} {phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "X-Codemode-Egress: refused\r\n\r\n"
    )
    return head.encode("ascii") + body

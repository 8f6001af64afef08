"""Hostile code with the egress proxy on: the proxy is its only way out, and it cannot be
talked into more than the allowlist. Every session is proved isolated before code runs.

The code speaks raw bytes to the proxy's socket, as an attacker would, and the host checks
that the servers it must not reach saw nothing.
"""

from __future__ import annotations

import pytest
from egress_servers import Servers, wait_for_events

from codemode.audit import MemoryAuditLog
from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

RAW = """
import socket
def ask(data, read=65536):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect("/run/codemode/egress.sock")
    try:
        s.sendall(data)
    except OSError:
        pass
    answer = b""
    try:
        while len(answer) < read and (chunk := s.recv(65536)):
            answer += chunk
    except OSError as error:
        answer += b" <" + type(error).__name__.encode() + b">"
    s.close()
    return answer
def status(data):
    return ask(data).split(b"\\r\\n", 1)[0].decode()
"""


def run(session: SandboxSession, code: str) -> list[str]:
    result = session.execute(RAW + code, timeout_s=30)
    assert result.status == "ok", result.render_text()
    return result.stdout.splitlines()


def test_ip_sockets_still_fail_with_the_proxy_on(
    egress_session: SandboxSession, servers: Servers
) -> None:
    before = servers.listed.seen.connections
    out = run(
        egress_session,
        f"""
for family in (socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(family, socket.SOCK_STREAM)
        print("ESCAPED")
    except OSError as error:
        print("BLOCKED", error.errno)
try:
    socket.create_connection(("127.0.0.1", {servers.listed.port}), timeout=1)
    print("ESCAPED")
except OSError:
    print("BLOCKED")
print(socket.getaddrinfo("egress.codemode", 3128)[0][0] == socket.AF_UNIX)
""",
    )
    assert out == ["BLOCKED 97", "BLOCKED 97", "BLOCKED", "True"]
    assert servers.listed.seen.connections == before


def test_unlisted_hosts_ports_and_spellings_are_refused(
    egress_session: SandboxSession, servers: Servers, audit: MemoryAuditLog
) -> None:
    listed, other = servers.listed.port, servers.other.port
    targets = [
        f"127.0.0.1:{other}",  # another server
        "127.0.0.1:22",  # another port of a listed host
        f"localhost:{other}",
        f"[::1]:{listed}",  # the same machine, by another address
        f"2130706433:{listed}",  # 127.0.0.1 spelt as a number
        f"127.1:{listed}",  # and abbreviated
        f"0x7f000001:{listed}",
        f"metadata.google.internal:{listed}",
        f"169.254.169.254:{listed}",
    ]
    before = (servers.listed.seen.connections, servers.other.seen.connections)
    out = run(
        egress_session,
        f"""
for target in {targets!r}:
    line = status(f"CONNECT {{target}} HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
    print(line[:12], "is not in [sandbox.network] allow; to reach it, add" in line)
""",
    )
    assert out == ["HTTP/1.1 403 True"] * len(targets)
    assert (servers.listed.seen.connections, servers.other.seen.connections) == before
    events = wait_for_events(audit, len(targets))
    assert [e.decision for e in events] == ["deny"] * len(targets)


def test_a_host_header_naming_another_host_is_refused(
    egress_session: SandboxSession, servers: Servers
) -> None:
    listed, other = servers.listed.port, servers.other.port
    requests_before = len(servers.listed.seen.requests)
    out = run(
        egress_session,
        f"""
print(status(b"GET http://127.0.0.1:{listed}/ HTTP/1.1\\r\\nHost: 127.0.0.1:{other}\\r\\n\\r\\n"))
print(status(b"GET http://127.0.0.1:{listed}/ HTTP/1.1\\r\\nHost: 127.0.0.1:{listed}\\r\\nHost: evil\\r\\n\\r\\n"))
print(status(b"GET /relative HTTP/1.1\\r\\nHost: 127.0.0.1:{listed}\\r\\n\\r\\n"))
""",
    )
    assert [line[:12] for line in out] == ["HTTP/1.1 400"] * 3
    assert "the Host header names" in out[0]
    assert len(servers.listed.seen.requests) == requests_before


def test_a_second_connect_in_the_same_stream_stays_in_the_tunnel(
    egress_session: SandboxSession, servers: Servers, audit: MemoryAuditLog
) -> None:
    echo, other = servers.echo.port, servers.other.port
    before = servers.other.seen.connections
    out = run(
        egress_session,
        f"""
first = b"CONNECT 127.0.0.1:{echo} HTTP/1.1\\r\\n\\r\\n"
second = b"CONNECT 127.0.0.1:{other} HTTP/1.1\\r\\n\\r\\nGET / HTTP/1.1\\r\\n\\r\\n"
expected = b"HTTP/1.1 200 Connection established\\r\\n\\r\\n" + second
print(ask(first + second, read=len(expected)) == expected)
""",
    )
    assert out == ["True"]  # the echo server got the smuggled request as data
    assert servers.other.seen.connections == before
    events = wait_for_events(audit, 1)
    assert [(e.decision, e.message.split(" ")[1]) for e in events] == [
        ("allow", f"127.0.0.1:{echo}")
    ]


def test_huge_heads_are_bounded_and_the_proxy_keeps_serving(
    egress_session: SandboxSession, servers: Servers
) -> None:
    listed = servers.listed.port
    out = run(
        egress_session,
        f"""
pad = b"X-Pad: " + b"a" * 8000 + b"\\r\\n"
print(status(b"GET http://127.0.0.1:{listed}/ HTTP/1.1\\r\\n" + pad * 2000 + b"\\r\\n"))
print(status(b"GET http://127.0.0.1:{listed}/ HTTP/1.1\\r\\n" + b"X: y\\r\\n" * 500 + b"\\r\\n"))
print(status(b"G" * 200000))
print(status(b"\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xfc\\x03\\x03" + bytes(300) + b"\\r\\n\\r\\n"))
print(ask(b"GET http://127.0.0.1:{listed}/after HTTP/1.1\\r\\n\\r\\n").endswith(b"GET /after"))
""",
    )
    assert out[0].startswith("HTTP/1.1 431 the request head is over 65536 bytes")
    assert out[1].startswith("HTTP/1.1 431 more than 100 headers")
    assert out[2].startswith("HTTP/1.1 431 ")
    assert out[3].startswith("HTTP/1.1 400 malformed proxy request")
    assert out[4] == "True"


def test_a_connection_flood_is_capped(egress_session: SandboxSession, servers: Servers) -> None:
    out = run(
        egress_session,
        f"""
held, answers = [], []
for _ in range(20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect("/run/codemode/egress.sock")
    s.sendall(b"CONNECT 127.0.0.1:{servers.echo.port} HTTP/1.1\\r\\n\\r\\n")
    answers.append(s.recv(200).split(b" ", 2)[1].decode())
    held.append(s)
print(answers.count("200"), answers.count("503"))
for s in held:
    s.close()
""",
    )
    assert out == ["8 12"]  # max_connections = 8 in the fixture


def test_the_socket_cannot_be_replaced_or_removed(egress_session: SandboxSession) -> None:
    out = run(
        egress_session,
        """
import os
for attempt in (lambda: os.unlink("/run/codemode/egress.sock"),
                lambda: os.rename("/run/codemode/egress.sock", "/tmp/x"),
                lambda: open("/run/codemode/egress.sock", "w")):
    try:
        attempt()
        print("ESCAPED")
    except OSError as error:
        print("BLOCKED")
""",
    )
    assert out == ["BLOCKED"] * 3

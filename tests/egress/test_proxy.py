"""The proxy on the host, driven over its Unix socket with raw bytes against real local
servers: what it admits, what it refuses and how, and what it reports."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from egress_servers import Recorder, Servers, exchange, read_exactly

from codemode.audit import MemoryAuditLog
from codemode.audit.events import AuditFilter
from codemode.egress import ConnectionRecord, EgressHub, NetworkSettings, StaticResolver
from codemode.egress.proxy import sweep_orphans
from codemode.engine.egress import EgressAudit
from codemode.hostnames import IPAddress


def _get(path: str, url: str, host: str, extra: str = "") -> bytes:
    request = f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: keep-alive\r\n\r\n"
    return exchange(path, request.encode())


def test_a_listed_server_answers_once_per_connection(
    hub: EgressHub, servers: Servers, recorder: Recorder
) -> None:
    gate = hub.open_gate()
    gate.session = "s-1"
    port = servers.listed.port
    answer = _get(gate.path, f"http://127.0.0.1:{port}/a?b=1", f"127.0.0.1:{port}")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: close" in head
    assert body == b"listed GET /a?b=1"
    # The upstream got an origin-form request with its own Host.
    assert servers.listed.seen.requests[-1] == ("GET", "/a?b=1", f"127.0.0.1:{port}")
    (record,) = recorder.wait_for(1)
    assert (record.session, record.method, record.host, record.port) == (
        "s-1",
        "GET",
        "127.0.0.1",
        port,
    )
    added = len(b"Connection: close\r\n")  # by the proxy, not counted as received
    assert (record.address, record.outcome, record.received) == (
        "127.0.0.1",
        "ok",
        len(answer) - added,
    )
    assert record.sent > 0 and record.duration_ms > 0
    gate.close()


def test_an_unlisted_server_is_refused_before_any_connection(
    hub: EgressHub, servers: Servers, recorder: Recorder
) -> None:
    gate = hub.open_gate()
    port = servers.other.port
    answer = _get(gate.path, f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}")
    assert answer.startswith(
        f"HTTP/1.1 403 127.0.0.1:{port} is not in [sandbox.network] allow".encode()
    )
    assert f'add "127.0.0.1:{port}" to allow'.encode() in answer
    assert servers.other.seen.connections == 0
    (record,) = recorder.wait_for(1)
    assert (record.outcome, record.error_code, record.address) == (
        "denied",
        "egress_not_listed",
        None,
    )
    gate.close()


def test_a_name_resolving_to_loopback_is_refused_unless_its_range_is_listed(
    servers: Servers, recorder: Recorder
) -> None:
    port = servers.listed.port
    strict = EgressHub(servers.network(allow_private=[]), sink=recorder)
    gate = strict.open_gate()
    try:
        answer = _get(gate.path, f"http://localhost:{port}/", f"localhost:{port}")
    finally:
        gate.close()
    assert answer.startswith(f"HTTP/1.1 403 localhost:{port} resolves to ".encode())
    assert b"allow_private" in answer
    (record,) = recorder.wait_for(1)
    assert record.error_code == "egress_private_address"
    assert record.address in ("127.0.0.1", "::1")  # what the host's resolver answered first
    # Listed: the same name is reachable.
    lenient = EgressHub(servers.network(), sink=recorder)
    gate = lenient.open_gate()
    try:
        answer = _get(gate.path, f"http://localhost:{port}/ok", f"localhost:{port}")
    finally:
        gate.close()
    assert answer.endswith(b"listed GET /ok")


class CountingResolver(StaticResolver):
    """Answers 127.0.0.1 first and a rebinding address after: the proxy must ask once."""

    def __init__(self) -> None:
        super().__init__({})
        self.calls = 0

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        import ipaddress

        self.calls += 1
        return [ipaddress.ip_address("127.0.0.1" if self.calls == 1 else "127.0.0.2")]


def test_the_checked_address_is_the_one_connected_to(servers: Servers, recorder: Recorder) -> None:
    resolver = CountingResolver()
    network = NetworkSettings(
        allow=[f"api.test:{servers.echo.port}"], allow_private=["127.0.0.1/32"]
    )
    hub = EgressHub(network, resolver=resolver, sink=recorder)
    gate = hub.open_gate()
    try:
        before = servers.echo.seen.connections
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(10)
            client.connect(gate.path)
            client.sendall(f"CONNECT api.test:{servers.echo.port} HTTP/1.1\r\n\r\nping".encode())
            answer = read_exactly(client, len(b"HTTP/1.1 200 Connection established\r\n\r\nping"))
    finally:
        gate.close()
        hub.close()
    assert answer == b"HTTP/1.1 200 Connection established\r\n\r\nping"
    assert resolver.calls == 1
    assert servers.echo.seen.connections == before + 1
    assert recorder.wait_for(1)[0].address == "127.0.0.1"


def test_a_second_connect_smuggled_behind_the_first_is_tunnel_data(
    hub: EgressHub, servers: Servers, recorder: Recorder
) -> None:
    gate = hub.open_gate()
    smuggled = f"CONNECT 127.0.0.1:{servers.other.port} HTTP/1.1\r\n\r\n".encode()
    first = f"CONNECT 127.0.0.1:{servers.echo.port} HTTP/1.1\r\n\r\n".encode()
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(gate.path)
        client.sendall(first + smuggled)
        expected = b"HTTP/1.1 200 Connection established\r\n\r\n" + smuggled
        assert read_exactly(client, len(expected)) == expected  # echoed by the listed server
    gate.close()
    assert servers.other.seen.connections == 0
    (record,) = recorder.wait_for(1)
    assert (record.method, record.port, record.sent) == (
        "CONNECT",
        servers.echo.port,
        len(smuggled),
    )


def test_https_through_connect_keeps_tls_end_to_end(hub: EgressHub, servers: Servers) -> None:
    gate = hub.open_gate()
    context = ssl.create_default_context(cafile=str(servers.ca_file))
    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(10)
        raw.connect(gate.path)
        raw.sendall(f"CONNECT localhost:{servers.tls.port} HTTP/1.1\r\n\r\n".encode())
        assert read_exactly(raw, 39) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET /secret HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    gate.close()
    assert answer.endswith(b"tls GET /secret")


def test_huge_heads_are_refused_and_bounded(hub: EgressHub, servers: Servers) -> None:
    gate = hub.open_gate()
    port = servers.listed.port
    flood = "".join(f"X-Pad-{n}: {'a' * 1000}\r\n" for n in range(1000))  # 1 MB of headers
    answer = _get(gate.path, f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}", flood)
    assert answer.startswith(b"HTTP/1.1 431 the request head is over 65536 bytes")
    many = "".join(f"X-{n}: v\r\n" for n in range(150))
    answer = _get(gate.path, f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}", many)
    assert answer.startswith(b"HTTP/1.1 431 more than 100 headers")
    # The proxy serves the next request.
    assert _get(gate.path, f"http://127.0.0.1:{port}/x", f"127.0.0.1:{port}").endswith(b"GET /x")
    gate.close()


def test_connections_beyond_the_limit_are_refused(hub: EgressHub, servers: Servers) -> None:
    gate = hub.open_gate()
    held = []
    try:
        for _ in range(8):  # max_connections in the fixture
            client = socket.socket(socket.AF_UNIX)
            client.settimeout(10)
            client.connect(gate.path)
            client.sendall(f"CONNECT 127.0.0.1:{servers.echo.port} HTTP/1.1\r\n\r\n".encode())
            assert read_exactly(client, 39).startswith(b"HTTP/1.1 200")
            held.append(client)
        answer = exchange(gate.path, b"")
        assert answer.startswith(b"HTTP/1.1 503 ") and b"max_connections" in answer
    finally:
        for client in held:
            client.close()
        gate.close()


def test_closing_a_gate_ends_its_tunnels_and_removes_its_socket(
    servers: Servers, recorder: Recorder
) -> None:
    hub = EgressHub(servers.network(), sink=recorder)
    gate = hub.open_gate()
    assert Path(gate.path).is_socket() and oct(Path(gate.directory).stat().st_mode)[-3:] == "700"
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(gate.path)
        client.sendall(f"CONNECT 127.0.0.1:{servers.echo.port} HTTP/1.1\r\n\r\n".encode())
        assert read_exactly(client, 39).startswith(b"HTTP/1.1 200")
        gate.close()
        assert client.recv(10) == b""  # the tunnel ended with the gate
    assert not Path(gate.directory).exists()
    assert recorder.wait_for(1)[0].outcome == "ok"  # reported although cut off
    deadline = time.monotonic() + 10
    while hub._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hub._thread is None  # the last gate stopped the hub's thread


def test_records_become_audit_events(servers: Servers) -> None:
    log = MemoryAuditLog()
    hub = EgressHub(servers.network(), sink=EgressAudit(log))
    gate = hub.open_gate()
    gate.session = "s-audit"
    port, other = servers.listed.port, servers.other.port
    _get(gate.path, f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}")
    _get(gate.path, f"http://127.0.0.1:{other}/", f"127.0.0.1:{other}")
    gate.close()
    events = log.query(AuditFilter(tool="_network.connect"))
    assert [(e.session, e.decision, e.outcome) for e in events] == [
        ("s-audit", "allow", "ok"),
        ("s-audit", "deny", "denied"),
    ]
    assert events[0].message.startswith(f"GET 127.0.0.1:{port} via 127.0.0.1: sent ")
    assert events[1].rule == "sandbox.network.allow" and events[1].error_code == "egress_not_listed"


def test_gate_directories_left_by_a_dead_process_are_swept(servers: Servers) -> None:
    base = Path(tempfile.mkdtemp(prefix="cm-"))  # short: a socket path has 108 bytes at most
    try:
        dead = base / "codemode-egress-dead"
        dead.mkdir()
        with socket.socket(socket.AF_UNIX) as stale:
            stale.bind(str(dead / "egress.sock"))  # bound, never listening again
        (base / "codemode-egress-empty").mkdir()
        (base / "codemode-egress-young").mkdir()  # maybe a gate being made now
        long_ago = time.time() - 3600
        for name in ("dead", "empty"):
            os.utime(base / f"codemode-egress-{name}", (long_ago, long_ago))
        hub = EgressHub(servers.network(), base=str(base))
        assert sorted(p.name for p in base.iterdir()) == ["codemode-egress-young"]
        gate = hub.open_gate()
        os.utime(gate.directory, (long_ago, long_ago))
        assert sweep_orphans(str(base)) == 0  # an old gate that listens is alive
        assert Path(gate.path).is_socket()
        hub.close()  # closes its gates: their directories go
        assert sorted(p.name for p in base.iterdir()) == ["codemode-egress-young"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_listed_destination_that_does_not_answer_is_a_502_and_an_error(
    servers: Servers, recorder: Recorder
) -> None:
    with socket.socket() as closed:  # a port nothing listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    log = MemoryAuditLog()
    audit = EgressAudit(log)

    def both(record: ConnectionRecord) -> None:
        recorder(record)
        audit(record)

    hub = EgressHub(servers.network(allow=[f"127.0.0.1:{port}"]), sink=both)
    gate = hub.open_gate()
    try:
        answer = _get(gate.path, f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}")
    finally:
        hub.close()
    assert answer.startswith(
        f"HTTP/1.1 502 could not connect to 127.0.0.1:{port} (127.0.0.1)".encode()
    )
    (record,) = recorder.wait_for(1)
    assert (record.outcome, record.error_code) == ("error", "egress_unreachable")
    (event,) = log.query(AuditFilter(tool="_network.connect"))
    assert (event.decision, event.outcome) == ("allow", "error")
    assert event.message.startswith(f"GET 127.0.0.1:{port} via 127.0.0.1: sent 0 B, received 0 B; ")

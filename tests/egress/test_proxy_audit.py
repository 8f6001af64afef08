"""Every connection through the egress proxy is reported, not only those that made a request:
one refused over ``max_connections`` (503) and one that never sent a whole request head."""

from __future__ import annotations

import socket

import pytest
from egress_servers import Recorder, Servers, exchange, read_exactly

from codemode.egress import EgressHub
from codemode.engine.egress import audit_event


def test_a_connection_refused_over_max_connections_is_reported(
    hub: EgressHub, servers: Servers, recorder: Recorder
) -> None:
    gate = hub.open_gate()
    gate.session = "s-flood"
    held = []
    try:
        for _ in range(8):  # max_connections in the fixture
            client = socket.socket(socket.AF_UNIX)
            client.settimeout(10)
            client.connect(gate.path)
            client.sendall(f"CONNECT 127.0.0.1:{servers.echo.port} HTTP/1.1\r\n\r\n".encode())
            assert read_exactly(client, 39).startswith(b"HTTP/1.1 200")
            held.append(client)
        assert exchange(gate.path, b"").startswith(b"HTTP/1.1 503 ")
        record = recorder.first("egress_busy")
    finally:
        for client in held:
            client.close()
        gate.close()
    assert (record.session, record.outcome, record.allowed) == ("s-flood", "denied", False)
    event = audit_event(record)
    assert event.decision == "deny" and "max_connections" in event.message


@pytest.mark.parametrize("sent", [b"", b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127"])
def test_a_connection_that_never_sends_a_whole_request_is_reported(
    hub: EgressHub, recorder: Recorder, sent: bytes
) -> None:
    gate = hub.open_gate()
    gate.session = "s-probe"
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(gate.path)
            client.sendall(sent)
            client.shutdown(socket.SHUT_WR)
            client.settimeout(10)
            client.recv(1)  # the proxy closes its side
        record = recorder.first("egress_incomplete_request")
    finally:
        gate.close()
    assert (record.session, record.outcome, record.sent) == ("s-probe", "error", len(sent))
    assert "closed before a whole request head" in audit_event(record).message

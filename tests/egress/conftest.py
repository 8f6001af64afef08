"""Fixtures for the egress tests: real local servers on 127.0.0.1, and real sandboxes whose
``[sandbox.network]`` lists some of them. Code runs only in sandboxes proved isolated."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from egress_servers import EchoServer, HttpServer, self_signed

from codemode.audit import MemoryAuditLog
from codemode.egress import NetworkSettings
from codemode.engine.egress import audit_egress
from codemode.sandbox import BwrapBackend, Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation


@dataclass
class Servers:
    listed: HttpServer  # in allow
    other: HttpServer  # not in allow
    tls: HttpServer  # in allow, HTTPS with a self-signed certificate
    echo: EchoServer  # in allow (a tunnel's far end)
    ca_file: Path  # the certificate to trust for ``tls``

    def network(self, **overrides: object) -> NetworkSettings:
        allow = [
            f"127.0.0.1:{self.listed.port}",
            f"localhost:{self.listed.port}",
            f"localhost:{self.tls.port}",
            f"127.0.0.1:{self.echo.port}",
        ]
        values: dict[str, object] = {
            "allow": allow,
            "allow_private": ["127.0.0.0/8"],
            "max_connections": 8,
        }
        values.update(overrides)
        return NetworkSettings.model_validate(values)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    context, ca_file = self_signed(tmp_path_factory.mktemp("tls"))
    made = Servers(HttpServer("listed"), HttpServer("other"), HttpServer("tls", context),
                   EchoServer(), ca_file)  # fmt: skip
    yield made
    for server in (made.listed, made.other, made.tls, made.echo):
        server.close()


def sandbox_settings(network: NetworkSettings) -> SandboxSettings:
    limits = Limits(wall_time_s=30, memory_bytes=1024 * 1024 * 1024)
    return SandboxSettings(limits=limits, network=network, pool_size=1)


@pytest.fixture(scope="module")
def egress_backend(servers: Servers) -> BwrapBackend:
    return BwrapBackend(sandbox_settings(servers.network()))


@pytest.fixture(scope="module")
def egress_pool(egress_backend: BwrapBackend) -> Iterator[SandboxPool]:
    with SandboxPool(egress_backend, size=1) as pool:
        yield pool


@pytest.fixture
def audit(egress_backend: BwrapBackend) -> MemoryAuditLog:
    """A fresh audit log for this test's connections (those of earlier tests have ended)."""
    hub = egress_backend.egress
    assert hub is not None
    for _ in range(200):
        if hub.open_connections == 0:
            break
        threading.Event().wait(0.05)
    assert hub.open_connections == 0, "connections of an earlier test are still open"
    log = MemoryAuditLog()
    audit_egress(egress_backend, log, None)
    return log


def verified(pool: SandboxPool, name: str) -> SandboxSession:
    session = SandboxSession(pool, name)
    session.execute("pass")
    assert session.sandbox is not None
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    return session


@pytest.fixture
def egress_session(egress_pool: SandboxPool) -> Iterator[SandboxSession]:
    session = verified(egress_pool, "egress-test")
    yield session
    session.close()

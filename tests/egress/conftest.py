"""Fixtures for the egress tests: real local servers on 127.0.0.1, and real sandboxes whose
``[sandbox.network]`` lists some of them. Code runs only in sandboxes proved isolated."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from egress_servers import (
    EchoServer,
    HttpServer,
    Recorder,
    Servers,
    sandbox_settings,
    self_signed,
    verified,
)

from codemode.audit import MemoryAuditLog
from codemode.egress import EgressHub
from codemode.engine.egress import audit_egress
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    context, ca_file = self_signed(tmp_path_factory.mktemp("tls"))
    made = Servers(HttpServer("listed"), HttpServer("other"), HttpServer("tls", context),
                   EchoServer(), ca_file)  # fmt: skip
    yield made
    for server in (made.listed, made.other, made.tls, made.echo):
        server.close()


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


@pytest.fixture
def egress_session(egress_pool: SandboxPool) -> Iterator[SandboxSession]:
    session = verified(egress_pool, "egress-test")
    yield session
    session.close()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def hub(servers: Servers, recorder: Recorder) -> Iterator[EgressHub]:
    """A proxy hub on the test servers' network; its records go to ``recorder``."""
    hub = EgressHub(servers.network(), sink=recorder)
    yield hub
    hub.close()

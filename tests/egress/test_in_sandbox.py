"""The allowlist from inside real sandboxes: requests, httpx and urllib.request work unchanged
against a listed local server, everything else is refused with a message naming the config key,
and every connection is in the audit log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from egress_servers import Servers, sandbox_settings, verified, wait_for_events

from codemode.audit import MemoryAuditLog
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings


def run(session: SandboxSession, code: str) -> str:
    result = session.execute(code, timeout_s=30)
    assert result.status == "ok", result.render_text()
    return result.stdout


def test_requests_reaches_the_listed_server_and_is_refused_the_other(
    egress_session: SandboxSession, servers: Servers, audit: MemoryAuditLog
) -> None:
    listed, other = servers.listed.port, servers.other.port
    out = run(
        egress_session,
        f"""
import requests
print(requests.get("http://127.0.0.1:{listed}/hello").text)
print(requests.get("http://localhost:{listed}/by-name").text)
refused = requests.get("http://127.0.0.1:{other}/secret")
print(refused.status_code, refused.reason)
print(refused.text, end="")
""",
    )
    assert out.splitlines() == [
        "listed GET /hello",
        "listed GET /by-name",
        f"403 127.0.0.1:{other} is not in [sandbox.network] allow; to reach it, add "
        f'"127.0.0.1:{other}" to allow in the [sandbox.network] section of the codemode config',
        f"codemode egress proxy: 127.0.0.1:{other} is not in [sandbox.network] allow; to reach "
        f'it, add "127.0.0.1:{other}" to allow in the [sandbox.network] section of the codemode '
        "config",
    ]
    assert servers.other.seen.connections == 0
    events = wait_for_events(audit, 3)
    assert sorted((e.decision, e.outcome, e.session) for e in events) == [
        ("allow", "ok", "egress-test"),
        ("allow", "ok", "egress-test"),
        ("deny", "denied", "egress-test"),
    ]
    messages = sorted(e.message for e in events)
    assert messages[0].startswith(f"GET 127.0.0.1:{listed} via 127.0.0.1: sent ")
    # A refused host is the code's own words: scrubbed like any audit message (the digest
    # of host and port is there to check a guess against).
    assert messages[1] == f"GET <IP>:{other} refused"
    assert messages[2].startswith(f"GET localhost:{listed} via 127.0.0.1: sent ")


def test_httpx_and_urllib_work_unchanged(
    egress_session: SandboxSession, servers: Servers, audit: MemoryAuditLog
) -> None:
    port = servers.listed.port
    out = run(
        egress_session,
        f"""
import httpx, urllib.request
print(httpx.get("http://127.0.0.1:{port}/x").text)
print(httpx.post("http://127.0.0.1:{port}/form", content=b"payload").text)
with httpx.Client() as client:
    print(client.get("http://localhost:{port}/client").text)
print(urllib.request.urlopen("http://127.0.0.1:{port}/u", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:{servers.other.port}/", timeout=10)
except urllib.error.HTTPError as error:
    print(error)
""",
    )
    assert out.splitlines() == [
        "listed GET /x",
        "listed POST /form payload",
        "listed GET /client",
        "listed GET /u",
        f"HTTP Error 403: 127.0.0.1:{servers.other.port} is not in [sandbox.network] allow; to "
        f'reach it, add "127.0.0.1:{servers.other.port}" to allow in the [sandbox.network] '
        "section of the codemode config",
    ]
    assert len(wait_for_events(audit, 5)) == 5


def test_https_goes_through_connect_with_tls_end_to_end(
    egress_session: SandboxSession, servers: Servers, audit: MemoryAuditLog
) -> None:
    ca = servers.ca_file.read_text()
    port = servers.tls.port
    out = run(
        egress_session,
        f"""
import ssl, urllib.request, requests, httpx
open("/workspace/ca.pem", "w").write({ca!r})
print(requests.get("https://localhost:{port}/r", verify="/workspace/ca.pem").text)
print(httpx.get("https://localhost:{port}/h", verify=ssl.create_default_context(cafile="/workspace/ca.pem")).text)
context = ssl.create_default_context(cafile="/workspace/ca.pem")
print(urllib.request.urlopen("https://localhost:{port}/u", context=context, timeout=10).read().decode())
try:
    requests.get("https://example.com/")
except requests.exceptions.ProxyError as error:
    print("refused:", "[sandbox.network] allow" in str(error), '"example.com:443"' in str(error))
try:
    httpx.get("https://example.com/")
except httpx.ProxyError as error:
    print("refused:", str(error).startswith("403 example.com:443 is not in [sandbox.network] allow"))
""",
    )
    assert out.splitlines() == [
        "tls GET /r",
        "tls GET /h",
        "tls GET /u",
        "refused: True True",
        "refused: True",
    ]
    events = wait_for_events(audit, 5)
    assert sorted((e.message.split(" ")[0], e.outcome) for e in events) == [
        ("CONNECT", "denied"),
        ("CONNECT", "denied"),
        ("CONNECT", "ok"),
        ("CONNECT", "ok"),
        ("CONNECT", "ok"),
    ]


@pytest.fixture(scope="module")
def strict_pool(servers: Servers) -> Iterator[SandboxPool]:
    """``localhost`` listed, but no private range: the name resolves to loopback."""
    network = servers.network(allow_private=[])
    with SandboxPool(BwrapBackend(sandbox_settings(network)), size=1) as pool:
        yield pool


def test_a_name_resolving_to_a_private_address_is_refused_unless_listed(
    strict_pool: SandboxPool, servers: Servers
) -> None:
    session = verified(strict_pool, "strict")
    try:
        out = run(
            session,
            f"""
import requests
answer = requests.get("http://localhost:{servers.listed.port}/")
print(answer.status_code, answer.reason)
""",
        )
    finally:
        session.close()
    assert out.startswith(f"403 localhost:{servers.listed.port} resolves to ")
    assert "[sandbox.network] allow_private does not list" in out
    assert servers.listed.seen.requests.count(("GET", "/", f"localhost:{servers.listed.port}")) == 0


def test_without_allow_there_is_no_proxy_and_no_way_out(servers: Servers) -> None:
    with SandboxPool(BwrapBackend(SandboxSettings(pool_size=1)), size=1) as pool:
        session = verified(pool, "offline")
        try:
            out = run(
                session,
                f"""
import os, requests
print(os.path.exists("/run/codemode/egress.sock"), os.environ.get("HTTP_PROXY"))
try:
    requests.get("http://127.0.0.1:{servers.listed.port}/", timeout=2)
except requests.exceptions.ConnectionError as error:
    print("no network")
""",
            )
        finally:
            session.close()
    assert out.splitlines() == ["False None", "no network"]


def test_the_socket_mount_shows_no_host_directory(
    egress_session: SandboxSession, egress_backend: BwrapBackend
) -> None:
    out = run(egress_session, "print(open('/proc/self/mountinfo').read())")
    line = next(row for row in out.splitlines() if " /run/codemode/egress.sock " in row)
    sandbox = egress_session.sandbox
    assert sandbox is not None and sandbox.process.egress is not None
    hub = egress_backend.egress
    assert hub is not None and hub.base == "/dev/shm"  # a tmpfs on this machine
    # Only the path within that tmpfs: "/codemode-egress-XXXX/egress.sock".
    root = line.split()[3]
    assert root == sandbox.process.egress.path.removeprefix(hub.base)
    assert root.startswith("/codemode-egress-") and " - tmpfs " in line

"""Network egress: every socket family but AF_UNIX is refused, there is no route out, and host
unix sockets (paths and the abstract namespace) are out of reach. The bridge is the only way out.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox import SandboxSession

pytestmark = pytest.mark.hostile

SOCKET_PROBE = """
import socket
try:
    s = socket.socket({family}, {kind}, {proto})
    s.close()
    print("RESULT: ESCAPED created")
except OSError as error:
    print("RESULT: BLOCKED", error.errno)
"""

EAFNOSUPPORT = 97
FAMILIES = [
    ("AF_INET tcp", "socket.AF_INET", "socket.SOCK_STREAM", 0),
    ("AF_INET udp", "socket.AF_INET", "socket.SOCK_DGRAM", 0),
    ("AF_INET raw icmp", "socket.AF_INET", "socket.SOCK_RAW", 1),
    ("AF_INET ping", "socket.AF_INET", "socket.SOCK_DGRAM", 1),
    ("AF_INET6 tcp", "socket.AF_INET6", "socket.SOCK_STREAM", 0),
    ("AF_INET6 udp", "socket.AF_INET6", "socket.SOCK_DGRAM", 0),
    ("AF_PACKET raw", "17", "socket.SOCK_RAW", 0x0300),
    ("AF_PACKET dgram", "17", "socket.SOCK_DGRAM", 0x0300),
    ("AF_NETLINK route", "16", "socket.SOCK_RAW", 0),
    ("AF_NETLINK audit", "16", "socket.SOCK_RAW", 9),
    ("AF_VSOCK", "40", "socket.SOCK_STREAM", 0),
    ("AF_ALG", "38", "socket.SOCK_SEQPACKET", 0),
    ("AF_XDP", "44", "socket.SOCK_RAW", 0),
    ("AF_BLUETOOTH", "31", "socket.SOCK_STREAM", 0),
    ("AF_KEY", "15", "socket.SOCK_RAW", 2),
    ("AF_TIPC", "30", "socket.SOCK_RDM", 0),
]


@pytest.mark.parametrize(
    ("family", "kind", "proto"), [f[1:] for f in FAMILIES], ids=[f[0] for f in FAMILIES]
)
def test_socket_family_is_refused(
    isolated_session: SandboxSession, host, family: str, kind: str, proto: int
) -> None:
    code = SOCKET_PROBE.format(family=family, kind=kind, proto=proto)
    result = isolated_session.execute(code, timeout_s=5)
    assert result.stdout == f"RESULT: BLOCKED {EAFNOSUPPORT}\n", result.stdout
    host.next_execution_works(isolated_session)


RAW_SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_socket, SYS_socketpair = 41, 53
domain = ctypes.c_long({domain})
if {pair}:
    fds = (ctypes.c_int * 2)()
    rc = libc.syscall(ctypes.c_long(SYS_socketpair), domain, ctypes.c_long(1), ctypes.c_long(0), fds)
else:
    rc = libc.syscall(ctypes.c_long(SYS_socket), domain, ctypes.c_long(1), ctypes.c_long(0))
err = ctypes.get_errno()
if rc >= 0:
    print("RESULT: ESCAPED fd", rc)
else:
    print("RESULT: BLOCKED", err)
"""


@pytest.mark.parametrize(
    ("domain", "pair"),
    [
        (2, False),  # AF_INET
        (10, False),  # AF_INET6
        (17, False),  # AF_PACKET
        (16, False),  # AF_NETLINK
        ((1 << 32) | 2, False),  # AF_INET with junk in the upper half of the register
        (2, True),  # socketpair(AF_INET)
        (10, True),
    ],
    ids=["inet", "inet6", "packet", "netlink", "inet-high-bits", "pair-inet", "pair-inet6"],
)
def test_raw_socket_syscalls_via_ctypes_are_refused(
    isolated_session: SandboxSession, host, domain: int, pair: bool
) -> None:
    result = isolated_session.execute(RAW_SYSCALL.format(domain=domain, pair=pair), timeout_s=5)
    assert result.stdout == f"RESULT: BLOCKED {EAFNOSUPPORT}\n", result.stdout
    host.next_execution_works(isolated_session)


EGRESS = """
import socket
reached = []
targets = [("127.0.0.1", 22), ("127.0.0.1", 80), ("10.0.0.1", 80), ("8.8.8.8", 53),
           ("169.254.169.254", 80), ("172.17.0.1", 2375)]
for address in targets:
    try:
        socket.create_connection(address, timeout=0.3).close()
        reached.append(f"tcp {{address}}")
    except OSError:
        pass
try:
    socket.create_connection(("::1", 22), timeout=0.3).close()
    reached.append("tcp6")
except OSError:
    pass
for name in ("example.com", "pypi.org", "localhost", "metadata.google.internal"):
    try:
        if any(info[0] != socket.AF_UNIX for info in socket.getaddrinfo(name, 443)):
            socket.create_connection((name, 443), timeout=0.3).close()
            reached.append(f"dns+tcp {{name}}")
    except OSError:
        pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53))
    reached.append("udp")
except OSError:
    pass
try:
    import urllib.request
    urllib.request.urlopen("http://example.com/", timeout=0.5)
    reached.append("http")
except Exception:
    pass
print("RESULT:", "ESCAPED " + repr(reached) if reached else "BLOCKED")
"""


def test_no_route_out_tcp_udp_dns_http(isolated_session: SandboxSession, host) -> None:
    result = isolated_session.execute(EGRESS, timeout_s=10)
    assert result.stdout == "RESULT: BLOCKED\n", result.stdout
    host.next_execution_works(isolated_session)


@pytest.fixture
def host_unix_listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A unix socket listening on the host, under /tmp (the sandbox has its own /tmp)."""
    directory = Path(f"/tmp/codemode-hostsock-{uuid.uuid4().hex}")
    directory.mkdir(mode=0o755)
    path = directory / "host.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(8)
    server.setblocking(False)
    yield str(path)
    try:
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing from the sandbox ever connected
    finally:
        server.close()
        path.unlink()
        directory.rmdir()


@pytest.fixture
def host_abstract_listener() -> Iterator[str]:
    name = f"codemode-host-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + name)
    server.listen(8)
    server.setblocking(False)
    yield name
    try:
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


UNIX_CONNECT = """
import socket
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect({address!r})
    s.sendall(b"hello from the sandbox")
    print("RESULT: ESCAPED connected")
except OSError as error:
    print("RESULT: BLOCKED", type(error).__name__)
"""


def test_host_unix_socket_path_is_unreachable(
    isolated_session: SandboxSession, host, host_unix_listener: str
) -> None:
    result = isolated_session.execute(UNIX_CONNECT.format(address=host_unix_listener), timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED FileNotFoundError\n", result.stdout
    host.next_execution_works(isolated_session)


def test_host_abstract_unix_socket_is_unreachable(
    isolated_session: SandboxSession, host, host_abstract_listener: str
) -> None:
    code = UNIX_CONNECT.format(address="\0" + host_abstract_listener)
    result = isolated_session.execute(code, timeout_s=5)
    # A private network namespace has its own abstract socket namespace.
    assert result.stdout == "RESULT: BLOCKED ConnectionRefusedError\n", result.stdout
    host.next_execution_works(isolated_session)


WELL_KNOWN_SOCKETS = [
    "/run/systemd/private",
    "/run/dbus/system_bus_socket",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/user/0/bus",
    "\0/tmp/.X11-unix/X0",
    "\0/org/freedesktop/systemd1/notify",
]


@pytest.mark.parametrize("address", WELL_KNOWN_SOCKETS)
def test_well_known_host_sockets_are_unreachable(
    isolated_session: SandboxSession, host, address: str
) -> None:
    result = isolated_session.execute(UNIX_CONNECT.format(address=address), timeout_s=5)
    assert result.stdout.startswith("RESULT: BLOCKED"), result.stdout
    host.next_execution_works(isolated_session)


def test_only_loopback_exists(isolated_session: SandboxSession, host) -> None:
    code = """
import os
print("RESULT:", "BLOCKED" if open("/proc/net/dev").read().count(":") == 1 else "ESCAPED")
print(sorted(os.listdir("/proc/sys/net/ipv4/conf")))
"""
    result = isolated_session.execute(code, timeout_s=5)
    assert result.stdout == "RESULT: BLOCKED\n['all', 'default', 'lo']\n", result.stdout
    host.next_execution_works(isolated_session)

"""Real local servers on 127.0.0.1 for the egress tests: HTTP, TLS (a self-signed certificate
made here with ``cryptography``) and a TCP echo. Each counts the connections it accepted."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from codemode.audit import AuditLog
from codemode.audit.events import AuditEvent, AuditFilter
from codemode.egress import ConnectionRecord, NetworkSettings
from codemode.sandbox import Limits, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.isolation import require_isolation


@dataclass
class Seen:
    """What a server saw: connections accepted, and each request's (method, path, Host)."""

    connections: int = 0
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class HttpServer:
    """Answers ``<name> <METHOD> <path>`` (and echoes a POST's body) over HTTP/1.1."""

    def __init__(self, name: str, context: ssl.SSLContext | None = None) -> None:
        self.seen = Seen()
        seen, label = self.seen, name

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                with seen.lock:
                    seen.connections += 1
                super().setup()

            def _answer(self, extra: bytes = b"") -> None:
                with seen.lock:
                    seen.requests.append((self.command, self.path, self.headers.get("Host", "")))
                body = f"{label} {self.command} {self.path}".encode() + extra
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self._answer(b" " + self.rfile.read(length))

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class EchoServer:
    """Echoes every byte back on each connection (a tunnel's far end)."""

    def __init__(self) -> None:
        self.seen = Seen()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.seen.lock:
                self.seen.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.listener.close()
        self.thread.join(timeout=5)


def self_signed(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context for ``localhost``/127.0.0.1 and the certificate file to trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context, cert_file


def exchange(path: str, data: bytes, *, timeout: float = 10) -> bytes:
    """Send ``data`` to a Unix socket and read until it closes (the host's raw client)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(path)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            client.sendall(data)  # a refusal may come (and the proxy close) before the end
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def wait_for_events(log: AuditLog, count: int) -> list[AuditEvent]:
    """Records arrive when a connection ends, on the proxy's thread: wait (bounded)."""
    done = threading.Event()
    events: list[AuditEvent] = []
    for _ in range(200):
        events = log.query(AuditFilter(tool="_network.connect"))
        if len(events) >= count:
            return events
        done.wait(0.05)
    raise AssertionError(f"{len(events)} audit events, expected {count}: {events}")


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


def sandbox_settings(network: NetworkSettings) -> SandboxSettings:
    limits = Limits(wall_time_s=30, memory_bytes=1024 * 1024 * 1024)
    return SandboxSettings(limits=limits, network=network, pool_size=1)


def verified(pool: SandboxPool, name: str) -> SandboxSession:
    session = SandboxSession(pool, name)
    session.execute("pass")
    assert session.sandbox is not None
    require_isolation(session.sandbox)  # raises (the test fails) rather than run unisolated
    return session


class Recorder:
    """A record sink the test can wait on (records arrive when a connection ends)."""

    def __init__(self) -> None:
        self.records: list[ConnectionRecord] = []
        self.cond = threading.Condition()

    def __call__(self, record: ConnectionRecord) -> None:
        with self.cond:
            self.records.append(record)
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 10) -> list[ConnectionRecord]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.records) >= count, timeout), self.records
            return list(self.records)

    def first(self, code: str) -> ConnectionRecord:
        """The first record with error ``code`` (waited for)."""
        with self.cond:
            found = lambda: [r for r in self.records if r.error_code == code]  # noqa: E731
            assert self.cond.wait_for(found, 10), self.records
            return found()[0]


def read_exactly(client: socket.socket, count: int) -> bytes:
    """``count`` bytes from ``client``, or fewer if it closes first."""
    data = b""
    while len(data) < count:
        chunk = client.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data

"""The egress proxy's cost per request on loopback, against going direct.

    .venv/bin/python benchmarks/egress.py [--requests N] [--json]

N1  plain HTTP from the host, a new connection per request: direct TCP vs through the proxy's
    Unix socket (an absolute-URI request); the added time is the proxy's (target <= 1 ms)
N2  a CONNECT tunnel from the host: connect + one 1 KiB round trip, direct vs through the proxy
N3  ``requests.get`` inside a sandbox (through the proxy: the only way out) vs the same call on
    the host going direct with a fresh ``requests`` session each time (so both open a connection)
N4  ``urllib.request.urlopen`` likewise

Medians of ``--requests`` requests each, the two sides interleaved in one process, against a
local HTTP server on 127.0.0.1 (and a TCP echo server for N2).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "egress"))

from egress_servers import EchoServer, HttpServer

from codemode.egress import EgressHub, NetworkSettings
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings

INSIDE = """
import time, statistics, requests, urllib.request
url = "http://127.0.0.1:{port}/b"
def timed(call):
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000
for _ in range(5):
    requests.get(url).text
print(statistics.median(timed(lambda: requests.get(url).text) for _ in range({count})))
print(statistics.median(timed(lambda: urllib.request.urlopen(url).read()) for _ in range({count})))
"""


def _exchange(connect: Callable[[], socket.socket], request: bytes) -> bytes:
    with connect() as client:
        client.sendall(request)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    return data


def _unix(path: str) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)
        return client

    return connect


def _tcp(port: int) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client

    return connect


def _tunnel(connect: Callable[[], socket.socket], preface: bytes, payload: bytes) -> None:
    with connect() as client:
        client.sendall(preface + payload)
        expected = len(payload) + (39 if preface else 0)
        data = b""
        while len(data) < expected:
            data += client.recv(65536)


def _interleaved(sides: dict[str, Callable[[], object]], count: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for call in sides.values():  # warm up
        for _ in range(5):
            call()
    for _ in range(count):
        for name, call in sides.items():
            started = time.perf_counter()
            call()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def measure(count: int) -> dict[str, Any]:
    import urllib.request

    import requests

    http, echo = HttpServer("bench"), EchoServer()
    network = NetworkSettings(
        allow=[f"127.0.0.1:{http.port}", f"127.0.0.1:{echo.port}"], allow_private=["127.0.0.1/32"]
    )
    hub = EgressHub(network)
    gate = hub.open_gate()
    results: dict[str, Any] = {}
    try:
        get = f"GET /a HTTP/1.1\r\nHost: 127.0.0.1:{http.port}\r\nConnection: close\r\n\r\n"
        proxied = get.replace("GET /a", f"GET http://127.0.0.1:{http.port}/a")
        results["N1"] = _interleaved(
            {
                "direct": lambda: _exchange(_tcp(http.port), get.encode()),
                "proxy": lambda: _exchange(_unix(gate.path), proxied.encode()),
            },
            count,
        )
        payload = b"x" * 1024
        preface = f"CONNECT 127.0.0.1:{echo.port} HTTP/1.1\r\n\r\n".encode()
        results["N2"] = _interleaved(
            {
                "direct": lambda: _tunnel(_tcp(echo.port), b"", payload),
                "proxy": lambda: _tunnel(_unix(gate.path), preface, payload),
            },
            count,
        )
        url = f"http://127.0.0.1:{http.port}/b"

        def direct_requests() -> None:
            with requests.Session() as session:
                session.trust_env = False
                session.get(url).text  # noqa: B018 - read the body

        def direct_urllib() -> None:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            opener.open(url).read()

        host = _interleaved({"requests": direct_requests, "urllib": direct_urllib}, count)
        inside = _inside(network, http.port, count)
        results["N3"] = {"direct": host["requests"], "proxy": inside[0]}
        results["N4"] = {"direct": host["urllib"], "proxy": inside[1]}
    finally:
        gate.close()
        hub.close()
        http.close()
        echo.close()
    for numbers in results.values():
        numbers["added_ms"] = numbers["proxy"] - numbers["direct"]
        numbers["ratio"] = numbers["proxy"] / numbers["direct"]
    return {key: {k: round(v, 3) for k, v in value.items()} for key, value in results.items()}


def _inside(network: NetworkSettings, port: int, count: int) -> tuple[float, float]:
    backend = BwrapBackend(SandboxSettings(network=network, pool_size=1))
    with SandboxPool(backend, size=1) as pool:
        session = SandboxSession(pool, "bench")
        try:
            result = session.execute(INSIDE.format(port=port, count=count), timeout_s=120)
        finally:
            session.close()
    assert result.status == "ok", result.render_text()
    first, second = result.stdout.split()
    return float(first), float(second)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    numbers = measure(args.requests)
    if args.json:
        print(json.dumps(numbers))
        return 0
    labels = {
        "N1": "plain HTTP, host, new connection each",
        "N2": "CONNECT tunnel, host, 1 KiB round trip",
        "N3": "requests.get, sandbox vs host direct",
        "N4": "urllib.request, sandbox vs host direct",
    }
    for key, label in labels.items():
        row = numbers[key]
        print(
            f"{key} {label:40s} direct {row['direct']:.3f} ms  proxy {row['proxy']:.3f} ms  "
            f"added {row['added_ms']:.3f} ms  ratio {row['ratio']:.2f}"
            + ("  (target: added <= 1 ms)" if key == "N1" else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

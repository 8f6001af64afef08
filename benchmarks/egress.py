"""The egress proxy's cost per request on loopback, against going direct.

    .venv/bin/python benchmarks/egress.py [--requests N] [--json]

The upstream servers (HTTP, and a TCP echo for tunnels) run in a process of their own, as an
upstream would; the proxy runs in this process, as in the gateway. Each client runs in another
process and alternates the two sides, so both pay the same cross-process costs.

N1  plain HTTP, a new connection per request, client on the host: direct TCP vs an
    absolute-URI request through the proxy's Unix socket (target: <= 1 ms added); and the
    proxy's own CPU time per request (this process's CPU time over a proxied-only run: a
    number the machine's load does not inflate)
N2  a CONNECT tunnel, client on the host: connect + one 1 KiB round trip, direct vs proxied
N3  N1's request from inside a sandbox (through the proxy, its only way out) vs N1's direct
N4  ``requests.get`` inside a sandbox vs the same call on the host going direct
    (``trust_env=False``); both open a connection per request
N5  ``urllib.request.urlopen`` likewise

Medians of ``--requests`` requests per side.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from codemode.egress import EgressHub, NetworkSettings
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings

SERVERS = """
import http.server, socket, sys, threading
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
def echo(conn):
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
def echoes(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()
web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
listener = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=echoes, args=(listener,), daemon=True).start()
print(web.server_address[1], listener.getsockname()[1], flush=True)
web.serve_forever()
"""

# The client: run on the host (a subprocess) and inside the sandbox. Prints a JSON object of
# medians (ms) for the sides it is given.
CLIENT = """
import json, socket, statistics, time
HTTP, ECHO, SOCKET, COUNT, SIDES = {http}, {echo}, {socket!r}, {count}, {sides!r}
def tcp(port):
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client
def unix():
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(SOCKET)
    return client
def until_closed(client, data):
    with client:
        client.sendall(data)
        while client.recv(65536):
            pass
def round_trip(client, data, expected):
    with client:
        client.sendall(data)
        got = 0
        while got < expected:
            got += len(client.recv(65536))
GET = "GET {{}} HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nConnection: close\\r\\n\\r\\n" % HTTP
URL = "http://127.0.0.1:%d/b" % HTTP
PAYLOAD = b"x" * 1024
PREFACE = ("CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % ECHO).encode()
def direct_requests():
    import requests
    with requests.Session() as session:
        session.trust_env = False
        session.get(URL).content
def direct_urllib():
    import urllib.request
    urllib.request.build_opener(urllib.request.ProxyHandler({{}})).open(URL).read()
def proxied_requests():
    import requests
    requests.get(URL).content
def proxied_urllib():
    import urllib.request
    urllib.request.urlopen(URL).read()
CALLS = {{
    "http_direct": lambda: until_closed(tcp(HTTP), GET.format("/a").encode()),
    "http_proxy": lambda: until_closed(unix(), GET.format(URL).encode()),
    "tunnel_direct": lambda: round_trip(tcp(ECHO), PAYLOAD, len(PAYLOAD)),
    "tunnel_proxy": lambda: round_trip(unix(), PREFACE + PAYLOAD, len(PAYLOAD) + 39),
    "requests_direct": direct_requests,
    "urllib_direct": direct_urllib,
    "requests_proxy": proxied_requests,
    "urllib_proxy": proxied_urllib,
}}
samples = {{side: [] for side in SIDES}}
for side in SIDES:
    for _ in range(5):
        CALLS[side]()
for _ in range(COUNT):
    for side in SIDES:
        started = time.perf_counter()
        CALLS[side]()
        samples[side].append((time.perf_counter() - started) * 1000)
print(json.dumps({{side: statistics.median(values) for side, values in samples.items()}}))
"""

HOST_SIDES = ["http_direct", "http_proxy", "tunnel_direct", "tunnel_proxy"]
HOST_SIDES += ["requests_direct", "urllib_direct"]
SANDBOX_SIDES = ["http_proxy", "requests_proxy", "urllib_proxy"]


def measure(count: int) -> dict[str, dict[str, float]]:
    servers = subprocess.Popen([sys.executable, "-c", SERVERS], stdout=subprocess.PIPE, text=True)
    try:
        assert servers.stdout is not None
        http, echo = (int(word) for word in servers.stdout.readline().split())
        network = NetworkSettings(
            allow=[f"127.0.0.1:{http}", f"127.0.0.1:{echo}"], allow_private=["127.0.0.1/32"]
        )
        hub = EgressHub(network)
        gate = hub.open_gate()
        try:
            client = CLIENT.format(
                http=http, echo=echo, socket=gate.path, count=count, sides=HOST_SIDES
            )
            host = _run_client(client)
            # The proxy's own CPU per request, whatever the machine's load: this process runs
            # nothing else while a client sends only proxied requests.
            alone = CLIENT.format(
                http=http, echo=echo, socket=gate.path, count=count, sides=["http_proxy"]
            )
            started = time.process_time()
            _run_client(alone)
            proxy_cpu_ms = (time.process_time() - started) * 1000 / (count + 5)
        finally:
            gate.close()
            hub.close()
        # Inside there is no direct side to interleave with: one execution per side.
        inside = _inside(network, [
            CLIENT.format(
                http=http, echo=echo, socket="/run/codemode/egress.sock", count=count,
                sides=[side],
            )
            for side in SANDBOX_SIDES
        ])  # fmt: skip
    finally:
        servers.kill()
        servers.wait()
    pairs = {
        "N1": (host["http_direct"], host["http_proxy"]),
        "N2": (host["tunnel_direct"], host["tunnel_proxy"]),
        "N3": (host["http_direct"], inside["http_proxy"]),
        "N4": (host["requests_direct"], inside["requests_proxy"]),
        "N5": (host["urllib_direct"], inside["urllib_proxy"]),
    }
    numbers = {
        key: {
            "direct": round(direct, 3),
            "proxy": round(proxy, 3),
            "added_ms": round(proxy - direct, 3),
            "ratio": round(proxy / direct, 2),
        }
        for key, (direct, proxy) in pairs.items()
    }
    numbers["N1"]["proxy_cpu_ms"] = round(proxy_cpu_ms, 3)
    return numbers


def _run_client(client: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", client], capture_output=True, text=True, check=True
    )
    numbers: dict[str, float] = json.loads(done.stdout)
    return numbers


def _inside(network: NetworkSettings, clients: list[str]) -> dict[str, float]:
    backend = BwrapBackend(SandboxSettings(network=network, pool_size=1))
    numbers: dict[str, float] = {}
    with SandboxPool(backend, size=1) as pool:
        session = SandboxSession(pool, "bench")
        try:
            for client in clients:
                result = session.execute(client, timeout_s=300)
                assert result.status == "ok", result.render_text()
                numbers.update(json.loads(result.stdout))
        finally:
            session.close()
    return numbers


LABELS = {
    "N1": "plain HTTP, host client",
    "N2": "CONNECT + 1 KiB round trip, host client",
    "N3": "plain HTTP, sandbox (proxy) vs host",
    "N4": "requests.get, sandbox (proxy) vs host",
    "N5": "urllib.request, sandbox (proxy) vs host",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a few requests: does it still run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.requests = 5
    numbers = measure(args.requests)
    if args.json:
        print(json.dumps(numbers))
        return 0
    for key, label in LABELS.items():
        row = numbers[key]
        print(
            f"{key} {label:40s} direct {row['direct']:.3f} ms  proxy {row['proxy']:.3f} ms  "
            f"added {row['added_ms']:.3f} ms  ratio {row['ratio']:.2f}"
            + ("  (target: added <= 1 ms)" if key == "N1" else "")
        )
        if key == "N1":
            print(f"   the proxy's own CPU per request            {row['proxy_cpu_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

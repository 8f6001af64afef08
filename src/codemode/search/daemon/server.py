"""The search daemon: ``python -m codemode.search.daemon.server KEY FINGERPRINT semantic|lexical``.

Started by ``client.start_in_background`` through ``detach.py`` (a new session, not a child of
the search that started it, which has answered before this loads), holding the key's lock file
on ``--lock-fd``. It opens the stored index, runs one search to load what a query needs, binds
``s-<key>.sock`` (0600) in the runtime directory, listens, and only then closes the lock fd,
releasing the lock: until then, searches that find the lock held know a start is under way and
start no other daemon. It embeds queries on ONNX Runtime when it is installed (``ping`` says
which runtime, and ``query_precision`` whether queries run on the 8-bit weights, as they do
by default): nobody waits for its start, and each answer is then about 5 ms shorter (8 with
the 8-bit weights). It
answers requests one at a time. One JSON line in, one out:

    {"op": "search", "query": "...", "limit": 5}  ->  {"hits": [{...hit, "score": 0.7}, ...]}
    {"op": "ping"}  ->  {"pid": 123, "key": "...", "encoder": "onnx", "query_precision": "int8"}
    {"op": "stop"}                                ->  {"stopped": true}

Connections from another uid are closed unanswered (``SO_PEERCRED``). It exits when no request
came for ``idle_seconds()``, or its socket file was taken over or removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

from codemode.search.daemon.runtime import idle_seconds, runtime_dir, socket_path

__all__ = ["MAX_REQUEST_BYTES", "main"]

MAX_REQUEST_BYTES = 64 * 1024
_REQUEST_TIMEOUT_S = 10.0


def _peer_uid(connection: socket.socket) -> int:
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _read_line(connection: socket.socket) -> bytes | None:
    connection.settimeout(_REQUEST_TIMEOUT_S)
    data = b""
    while b"\n" not in data:
        chunk = connection.recv(4096)
        if not chunk or len(data) + len(chunk) > MAX_REQUEST_BYTES:
            return None
        data += chunk
    return data.split(b"\n", 1)[0]


def _answer(index: Any, request: Any, key: str) -> tuple[dict[str, Any], bool]:
    """The reply, and whether to stop."""
    from codemode.search.semantic import HybridIndex
    from codemode.search.store import hit_to_json

    if not isinstance(request, dict):
        return {"error": "a request is a JSON object"}, False
    op = request.get("op")
    if op == "ping":
        hybrid = isinstance(index, HybridIndex)
        encoder = index.encoder.backend if hybrid else None
        precision = index.encoder.query_precision if hybrid else None
        reply = {"pid": os.getpid(), "key": key, "encoder": encoder, "query_precision": precision}
        return reply, False
    if op == "stop":
        return {"stopped": True}, True
    query, limit = request.get("query"), request.get("limit", 5)
    if op != "search" or not isinstance(query, str) or not isinstance(limit, int) or limit < 1:
        return {"error": "expected {op: search, query: str, limit: int >= 1}"}, False
    hits = index.search(query, min(limit, 100))
    return {"hits": [hit_to_json(hit) | {"score": hit.score} for hit in hits]}, False


def _serve(
    listener: socket.socket,
    path: Path,
    identity: int,
    index: Any,
    key: str,
) -> None:
    listener.settimeout(idle_seconds())
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            return  # idle
        with connection:
            if _peer_uid(connection) != os.getuid():
                continue
            try:
                line = _read_line(connection)
                if line is None:
                    continue
                reply, stop = _answer(index, json.loads(line), key)
            except (OSError, ValueError):
                continue
            except Exception as error:  # noqa: BLE001 - the client then searches in its process
                reply, stop = {"error": f"search failed: {error}"}, False
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps(reply).encode() + b"\n")
            if stop:
                return
        try:
            if path.stat().st_ino != identity:
                return  # another daemon took the name over
        except OSError:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codemode-search-daemon")
    parser.add_argument("key")
    parser.add_argument("fingerprint")
    parser.add_argument("mode", choices=("semantic", "lexical"))
    parser.add_argument("--lock-fd", type=int, required=True)
    args = parser.parse_args(argv)
    directory = runtime_dir()
    if directory is None:
        return 1
    from codemode.search.semantic import open_stored_index

    index = open_stored_index(args.fingerprint, semantic=args.mode == "semantic")
    if index is None:
        return 1
    index.search("warm up the query path", 1)
    path = socket_path(directory, args.key)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        with contextlib.suppress(FileNotFoundError):
            # Stale: this process holds the key's lock, taken by its starter when no daemon
            # answered under it, and a daemon releases that lock only once it listens.
            path.unlink()
        old_mask = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old_mask)
        identity = path.stat().st_ino
        listener.listen(64)
        os.close(args.lock_fd)  # from now on searches find this daemon
        try:
            _serve(listener, path, identity, index, args.key)
        finally:
            with contextlib.suppress(OSError):
                if path.stat().st_ino == identity:
                    path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

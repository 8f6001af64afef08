"""A local package index on 127.0.0.1, serving tiny wheels (and an sdist) built by the tests."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from package_index import Index


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    root = tmp_path / "index"
    root.mkdir()

    def handler(*args: object, **kwargs: object) -> _Quiet:
        return _Quiet(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Index(root, f"http://127.0.0.1:{server.server_address[1]}/simple")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

"""What the three demo servers share: the command line, per-request SQLite access, annotations."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.types import ToolAnnotations

from codemode.demo.data import default_data_dir, open_db

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_Fn = TypeVar("_Fn", bound=Callable[..., Any])
EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")


def writes(*, destructive: bool, idempotent: bool, open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


def tool(server: MCPServer, annotations: ToolAnnotations) -> Callable[[_Fn], _Fn]:
    """Register a tool whose description is its docstring on one line (no indentation tokens)."""

    def register(fn: _Fn) -> _Fn:
        description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        server.add_tool(fn, description=description, annotations=annotations)
        return fn

    return register


class Store:
    """One SQLite file; each request opens its own connection (tools run on worker threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with contextlib.closing(open_db(path)) as conn:
            # Persistent per file: readers never block the writer across server processes.
            conn.execute("PRAGMA journal_mode=WAL")

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with contextlib.closing(open_db(self.path)) as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A transaction that takes the write lock up front, so read-then-write is atomic."""
        with contextlib.closing(open_db(self.path)) as conn:
            conn.isolation_level = None
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")


def like_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, with its own % and _ taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def serve(
    argv: list[str] | None, prog: str, description: str, build: Callable[[Path], MCPServer]
) -> int:
    """Parse `--data-dir`, build the server (generating data if needed), serve over stdio."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the SQLite files live (default: $CODEMODE_DEMO_DATA or "
        "~/.local/share/codemode/demo); generated on first start",
    )
    args = parser.parse_args(argv)
    server = build(args.data_dir or default_data_dir())
    server.run("stdio")
    return 0

"""The world the agent tasks run in: a fresh copy of the demo data (docs, CRM, mail), a workspace
directory, a git repository, a knowledge-graph file, a warehouse, and the config that serves
all of it through real MCP servers (the demo servers, npm server-filesystem and server-memory,
PyPI mcp-server-git and mcp-server-time, and the suite's own warehouse server).

Checkers look at this world (rows in the databases, files on disk, the graph, the repository),
never at what the model said.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NODE_BIN = ROOT / "third_party" / "node_modules" / ".bin"
PYPI_VENVS = ROOT / ".third_party"
THIRD_PARTY = {
    "filesystem": NODE_BIN / "mcp-server-filesystem",
    "memory": NODE_BIN / "mcp-server-memory",
    "git": PYPI_VENVS / "mcp-server-git" / "bin" / "mcp-server-git",
    "time": PYPI_VENVS / "mcp-server-time" / "bin" / "mcp-server-time",
}
GIT_COMMITS = [
    (
        "README.md",
        "# Beacon agent\n\nThe agent will recieve events from sensors.\n",
        "Initial commit",
    ),
    ("src/app.py", "def main():\n    print('beacon')\n", "Add the app entry point"),
    ("src/sensors.py", "SENSORS = ['edge', 'core']\n", "List the supported sensors"),
    ("docs/setup.md", "Install with pip.\n", "Document the setup"),
    ("src/app.py", "def main():\n    print('beacon agent')\n", "Name the agent in its banner"),
]


def _toml(value: Any) -> str:
    return json.dumps(value)


def missing_servers() -> list[str]:
    return [name for name, path in THIRD_PARTY.items() if not os.access(path, os.X_OK)]


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.workspace = root / "workspace"
        self.repo = self.workspace / "repo"
        self.memory_file = root / "memory.jsonl"
        self.ops = root / "ops"
        self.state = root / "state"
        self.config_path = root / "codemode.toml"
        # What a task's setup measured before the run, for its checker.
        self.expected: dict[str, Any] = {}
        # The agent's prompt lists every function of this world's catalog (a small one).
        self.catalog_listed = False

    @classmethod
    def create(cls, root: Path, servers: tuple[str, ...] = ()) -> World:
        """A fresh world at ``root`` serving ``servers`` (empty: every server)."""
        from codemode.demo.data import ensure_all

        missing = missing_servers()
        if missing:
            raise SystemExit(
                f"third-party MCP servers missing ({', '.join(missing)}): run `make third-party`"
            )
        world = cls(root)
        for directory in (world.data, world.workspace, world.ops, world.state):
            directory.mkdir(parents=True, exist_ok=True)
        ensure_all(world.data)
        world._make_repo()
        world._write_config(servers)
        return world

    def _make_repo(self) -> None:
        self.repo.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        for path, content, message in GIT_COMMITS:
            target = self.repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            self.git("add", path)
            self.git("commit", "-q", "-m", message)

    def git(self, *args: str) -> str:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "GIT_AUTHOR_NAME": "Bench",
            "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "Bench",
            "GIT_COMMITTER_EMAIL": "bench@example.com",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        done = subprocess.run(
            ["git", "-C", str(self.repo), *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=30,
        )
        return done.stdout

    def _write_config(self, only: tuple[str, ...] = ()) -> None:
        from codemode.demo import server_commands

        commands = server_commands(self.data)
        servers: dict[str, dict[str, Any]] = {
            name: {"command": commands[name][0], "args": commands[name][1:]}
            for name in ("docs", "crm", "mail")
        }
        servers["filesystem"] = {
            "command": str(THIRD_PARTY["filesystem"]),
            "args": [str(self.workspace)],
        }
        servers["memory"] = {
            "command": str(THIRD_PARTY["memory"]),
            "env": {"MEMORY_FILE_PATH": str(self.memory_file)},
        }
        servers["git"] = {
            "command": str(THIRD_PARTY["git"]),
            "args": ["--repository", str(self.repo)],
        }
        servers["time"] = {"command": str(THIRD_PARTY["time"]), "args": ["--local-timezone", "UTC"]}
        servers["ops"] = {
            "command": sys.executable,
            "args": [str(HERE / "bench_ops_server.py"), "--state", str(self.ops)],
        }
        if only:
            unknown = set(only) - set(servers)
            if unknown:
                raise SystemExit(f"no such server in the world: {sorted(unknown)}")
            servers = {name: table for name, table in servers.items() if name in only}
        lines = ["# Written by benchmarks/agent: the task suite's world.", ""]
        for name, table in servers.items():
            lines.append(f"[servers.{name}]")
            lines += [f"{key} = {_toml(value)}" for key, value in table.items() if key != "env"]
            if "env" in table:
                pairs = ", ".join(f"{k} = {_toml(v)}" for k, v in table["env"].items())
                lines.append(f"env = {{ {pairs} }}")
            lines.append('start = "startup"')
            lines.append("")
        lines += [
            "[sandbox]",
            "pool_size = 1",
            "[sandbox.limits]",
            "wall_time_s = 60",
            "",
            "[gateway]",
            f"state_dir = {_toml(str(self.state))}",
            "",
        ]
        flows = {"docs": ["crm", "mail"], "crm": ["mail"]}
        flows = {
            source: [to for to in targets if to in servers]
            for source, targets in flows.items()
            if source in servers
        }
        if flows:
            lines.append("[privacy.flows]")
            lines += [f"{source} = {_toml(targets)}" for source, targets in flows.items()]
            lines.append("")
        self.config_path.write_text("\n".join(lines), encoding="utf-8")

    # --- reading the world -------------------------------------------------------------------------

    def db(self, name: str) -> sqlite3.Connection:
        conn = sqlite3.connect(self.data / f"{name}.sqlite")
        conn.row_factory = sqlite3.Row
        return conn

    def rows(self, name: str, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        conn = self.db(name)
        try:
            return list(conn.execute(sql, params))
        finally:
            conn.close()

    def file(self, relative: str) -> str | None:
        path = self.workspace / relative
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    def ops_state(self) -> dict[str, Any]:
        path = self.ops / "ops.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def memory_graph(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(entities, relations) of the knowledge graph file."""
        entities: list[dict[str, Any]] = []
        relations: list[dict[str, Any]] = []
        if not self.memory_file.exists():
            return entities, relations
        for line in self.memory_file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            (entities if item.get("type") == "entity" else relations).append(item)
        return entities, relations

"""Two engines (two gateway replicas in one process, separate state directories and sandbox
pools) sharing a real Redis-compatible server, over in-process tools that record every call."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.config import CodemodeConfig, GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.policy import PolicySettings
from codemode.replicas.connection import SharedRedis
from codemode.replicas.keys import read_key_file
from codemode.replicas.sealing import StoreKey
from codemode.sandbox import Limits, SandboxSettings

ASK_ORDERS = {
    "rules": [{"tools": ["crm.place_order"], "action": "ask", "reason": "orders cost money"}]
}


@dataclass
class Crm:
    """An upstream with side effects: every order and every mail is recorded."""

    orders: list[dict[str, Any]] = field(default_factory=list)
    mails: list[str] = field(default_factory=list)

    def functions(self) -> list[Callable[..., Any]]:
        def customer() -> dict[str, str]:
            """The customer's contact."""
            return {"name": "Ada", "email": "ada.lovelace@example.com"}

        def send_mail(to: str) -> str:
            """Send a mail."""
            self.mails.append(to)
            return "sent"

        def place_order(item: str) -> dict[str, Any]:
            """Place an order (a side effect)."""
            self.orders.append({"item": item})
            return {"item": item, "number": len(self.orders)}

        return [customer, send_mail, place_order]


@pytest.fixture
def crm() -> Crm:
    return Crm()


def replica_config(
    tmp_path: Path, name: str, shared_store: str | None, key_file: Path | None = None
) -> CodemodeConfig:
    return CodemodeConfig(
        servers={},
        sandbox=SandboxSettings(limits=Limits(wall_time_s=20, cpu_time_s=5), pool_size=1),
        gateway=GatewaySettings(
            state_dir=tmp_path / name,
            shared_store=shared_store,
            session_lease_s=3.0,
            shared_store_key_file=key_file,
        ),
        policy=PolicySettings.model_validate(ASK_ORDERS),
    )


def key_file(
    path: Path, material: bytes | None = None, mode: int = 0o600, *, unlike: Path | None = None
) -> Path:
    """A key file holding ``material`` (random when None) as base64, with ``mode``.

    With ``unlike``, the random key's one-byte id differs from that key file's: two random
    keys share an id one time in 256, and then a replica reports a failed integrity check
    rather than a key it does not have (a test of "which key" must not depend on luck)."""
    if material is None:
        material = os.urandom(32)
        taken = None if unlike is None else read_key_file(unlike, key="unlike").key_id
        while StoreKey(material, "test").key_id == taken:
            material = os.urandom(32)
    path.write_text(base64.b64encode(material).decode() + "\n")
    path.chmod(mode)
    return path


def stored_bytes(url: str) -> bytes:
    """Every key and value in the Redis-compatible server at ``url``, whatever its type, as
    one blob: what its memory, dumps and replicas hold."""
    import redis

    client = redis.Redis.from_url(url)
    found: list[bytes] = []
    try:
        for key in client.scan_iter(count=500):
            found.append(key)
            kind = client.type(key).decode()
            if kind == "string":
                found.append(client.get(key) or b"")
            elif kind == "hash":
                for field_name, value in client.hgetall(key).items():
                    found += [field_name, value]
            elif kind == "set":
                found += list(client.smembers(key))
            elif kind == "list":
                found += client.lrange(key, 0, -1)
            elif kind == "zset":
                found += client.zrange(key, 0, -1)
            elif kind == "stream":
                for _, fields in client.xrange(key):
                    for field_name, value in fields.items():
                        found += [field_name, value]
            else:
                raise AssertionError(f"a key of type {kind} this scan does not read: {key!r}")
    finally:
        client.close()
    return b"\n".join(found)


@pytest.fixture
async def replicas(
    request: pytest.FixtureRequest, redis_server: Any, crm: Crm, tmp_path: Path
) -> AsyncIterator[tuple[Codemode, Codemode]]:
    """Replicas A and B: the same tools, the same shared store, nothing else in common.
    Parametrized indirectly with "encrypted", both have the same key file."""
    key = key_file(tmp_path / "store.key") if getattr(request, "param", "") == "encrypted" else None
    engines = [
        Codemode(
            replica_config(tmp_path, name, redis_server.url, key),
            catalog=Catalog([PythonConnector("crm", crm.functions())]),
            semantic=False,
        )
        for name in ("a", "b")
    ]
    async with engines[0] as a, engines[1] as b:
        yield a, b


@pytest.fixture
def redis(redis_server: Any) -> Iterator[SharedRedis]:
    """A connection to the test's shared store, closed after it."""
    connection = SharedRedis(redis_server.url)
    yield connection
    connection.close()


def wait_until(condition: Callable[[], object], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False

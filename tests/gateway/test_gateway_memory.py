"""What an HTTP gateway holds: the o200k tokenizer (about 60 MiB of the process) is loaded only
where the operator console, which charts the token ledger, is served."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codemode.gateway.web.ledger import TokenLedger

pytestmark = pytest.mark.anyio


def _maps_tokenizer(pid: int) -> bool:
    return "_toktok" in Path(f"/proc/{pid}/maps").read_text()


async def _one_execution(harness: Any, gateway: Any, headers: dict[str, str] | None) -> int:
    gateway.start()
    try:
        async with harness.client_for(harness.http_target(gateway.url, headers)) as client:
            await harness.execute_ok(client, "print(1)")
        assert gateway.process is not None
        return int(gateway.process.pid)
    except BaseException:
        gateway.stop()
        raise


async def test_an_anonymous_gateway_serves_no_console_and_never_loads_the_tokenizer(
    tmp_path: Path, fake_server_argv: list[str], harness: Any
) -> None:
    config = harness.write_config(tmp_path, {"fake": fake_server_argv}, pool_size=1)
    gateway = harness.HTTPGateway(
        config, tmp_path / "gateway.log", extra_args=("--insecure-allow-anonymous",)
    )
    pid = await _one_execution(harness, gateway, None)
    try:
        assert not _maps_tokenizer(pid), gateway.log()
    finally:
        gateway.stop()


async def test_a_gateway_with_the_console_counts_each_call_in_its_ledger(
    tmp_path: Path, fake_server_argv: list[str], harness: Any
) -> None:
    config = harness.write_config(tmp_path, {"fake": fake_server_argv}, pool_size=1)
    gateway = harness.HTTPGateway(config, tmp_path / "gateway.log")
    pid = await _one_execution(harness, gateway, harness.bearer(harness.MAIN))
    try:
        assert _maps_tokenizer(pid), gateway.log()
    finally:
        gateway.stop()


def test_the_catalog_is_counted_when_first_read_and_once() -> None:
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 1234

    ledger = TokenLedger(count)
    ledger.record("s1", "alice", 10)
    assert counted == []
    assert (ledger.definition_tokens, ledger.definition_tokens) == (1234, 1234)
    assert counted == [1]
    assert TokenLedger(99).definition_tokens == 99


FRAGMENTED_HEAP = """
from codemode.heap import trim_heap

def private_dirty_mib():
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) / 1024

# 25 MiB of 64 KiB blocks, each followed by a small one that stays: freeing the large blocks
# leaves holes that free() cannot give back.
large, kept = [], []
for _ in range(400):
    large.append(bytes(65536))
    kept.append(bytes(600))
del large
before = private_dirty_mib()
assert trim_heap()
print(before - private_dirty_mib())
"""


def test_trimming_the_heap_gives_freed_pages_back() -> None:
    run = subprocess.run(
        [sys.executable, "-c", FRAGMENTED_HEAP], capture_output=True, text=True, check=True
    )
    assert float(run.stdout) > 15, run.stdout

"""Parsing JSON-RPC messages: the MCP SDK's ``validate_json`` beside parse-then-validate, in one
process. Medians of repeated parses; ratios.

    .venv/bin/python benchmarks/jsonrpc_parse.py [--repeat 21] [--json] [--smoke]

Each message kind the SDK's transports read (a tool result, a notification, a request, an
error) with a string of 1 KB, 1 MB and 10 MB, as one line of JSON bytes (a tool result holds
its text twice, as content and as structured content, as the SDK's servers send it). Two
texts: ``orders``, the ASCII prose of ``peers.py``'s 1 MB echo (a line break every 2.4 KB), and
``names``, short lines with letters beyond ASCII (more escapes and wider strings to make). The
SDK's transports parse with ``jsonrpc_message_adapter.validate_json``; codemode parses first
and validates the parsed value (``codemode.connectors.jsonrpc.parse_jsonrpc``). Both give the
same message (checked here for each).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import mcp_types

from codemode.connectors.jsonrpc import parse_jsonrpc

SIZES = {"1 KB": 1_000, "1 MB": 1_000_000, "10 MB": 10_000_000}
_ORDER = "Order 4417 shipped to Berlin on 2024-05-02; invoice INV-0142 is due in 30 days, "
TEXTS = {
    "orders": (_ORDER + "total 1,240.50 EUR. ") * 24 + "Questions to ops@example.com.\n",
    "names": "Zoë Ünal, Łódź, 2024-05-02: 1 240,50 €\n",
}


def messages(size: int, line: str) -> dict[str, dict[str, Any]]:
    text = (line * (size // len(line) + 1))[:size]
    return {
        "tool result": {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"result": text},
                "isError": False,
            },
        },
        "notification": {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": text},
        },
        "request": {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        },
        "error": {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {"code": -32000, "message": "x", "data": text},
        },
    }


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def run(repeat: int, sizes: dict[str, int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size_name, size in sizes.items():
        for text_name, text in TEXTS.items():
            rows += _rows(f"{text_name}, {size_name}", messages(size, text), repeat)
    for row in rows:
        row["ratio"] = row["parse_first_ms"] / row["sdk_ms"]
    return rows


def _rows(label: str, kinds: dict[str, dict[str, Any]], repeat: int) -> list[dict[str, Any]]:
    adapter = mcp_types.jsonrpc_message_adapter
    rows = []
    for kind, message in kinds.items():
        line = json.dumps(message, ensure_ascii=False).encode()
        expected = adapter.validate_json(line, by_name=False)
        assert parse_jsonrpc(line) == expected, f"{kind}: not the same message"
        # Interleaved, so drift hits both alike.
        sdk, ours = [], []
        for _ in range(3):
            sdk.append(median_ms(partial(adapter.validate_json, line, by_name=False), repeat))
            ours.append(median_ms(partial(parse_jsonrpc, line), repeat))
        rows.append(
            {
                "message": f"{kind}, {label}",
                "sdk_ms": statistics.median(sdk),
                "parse_first_ms": statistics.median(ours),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--smoke", action="store_true", help="1 KB messages, once: does it run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(1, {"1 KB": 1_000}) if args.smoke else run(args.repeat, SIZES)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'message':<30} {'validate_json ms':>17} {'parse first ms':>15} {'ratio':>7}")
    for row in rows:
        print(
            f"{row['message']:<30} {row['sdk_ms']:>17.3f} {row['parse_first_ms']:>15.3f} "
            f"{row['ratio']:>7.3f}"
        )


if __name__ == "__main__":
    main()

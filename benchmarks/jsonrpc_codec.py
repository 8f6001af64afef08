"""JSON-RPC messages read and written: the MCP SDK's way beside codemode's, in one process.
Medians of repeated runs; ratios.

    .venv/bin/python benchmarks/jsonrpc_codec.py [--repeat 21] [--json] [--smoke]

Each message kind the transports carry (a tool result, a notification, a request, an error)
with a string of 1 KB, 1 MB and 10 MB (a tool result holds its text twice, as content and as
structured content, as the SDK's servers send it). Two texts: ``orders``, the ASCII prose of
``peers.py``'s 1 MB echo (a line break every 2.4 KB), and ``names``, short lines with letters
beyond ASCII (more escapes, wider strings).

read   one line of JSON bytes to the message: the SDK's transports use
       ``jsonrpc_message_adapter.validate_json``; codemode parses first and validates the
       parsed value (``codemode.connectors.jsonrpc.parse_jsonrpc``)
write  the message to its line: the SDK's stdio transport uses
       ``model_dump_json(by_alias=True, exclude_unset=True)`` and encodes it; codemode dumps to
       Python values and encodes those (``jsonrpc_line``)

Both ways give the same message and the same bytes (checked here for each).
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

from codemode.connectors.jsonrpc import jsonrpc_line, parse_jsonrpc

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


def sdk_line(message: Any) -> bytes:
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def run(repeat: int, sizes: dict[str, int]) -> list[dict[str, Any]]:
    adapter = mcp_types.jsonrpc_message_adapter
    rows: list[dict[str, Any]] = []
    for size_name, size in sizes.items():
        for text_name, text in TEXTS.items():
            for kind, value in messages(size, text).items():
                data = json.dumps(value, ensure_ascii=False).encode()
                message = adapter.validate_json(data, by_name=False)
                assert parse_jsonrpc(data) == message, f"{kind}: not the same message"
                assert jsonrpc_line(message) == sdk_line(message), f"{kind}: not the same bytes"
                ways = {
                    "read": (
                        partial(adapter.validate_json, data, by_name=False),
                        partial(parse_jsonrpc, data),
                    ),
                    "write": (partial(sdk_line, message), partial(jsonrpc_line, message)),
                }
                for direction, (sdk_way, our_way) in ways.items():
                    sdk, ours = [], []
                    for _ in range(3):  # interleaved, so drift hits both alike
                        sdk.append(median_ms(sdk_way, repeat))
                        ours.append(median_ms(our_way, repeat))
                    sdk_ms, our_ms = statistics.median(sdk), statistics.median(ours)
                    rows.append(
                        {
                            "direction": direction,
                            "message": f"{kind}, {text_name}, {size_name}",
                            "sdk_ms": sdk_ms,
                            "codemode_ms": our_ms,
                            "ratio": our_ms / sdk_ms,
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
    print(f"{'':<6} {'message':<30} {'SDK ms':>9} {'codemode ms':>12} {'ratio':>7}")
    for row in rows:
        print(
            f"{row['direction']:<6} {row['message']:<30} {row['sdk_ms']:>9.3f} "
            f"{row['codemode_ms']:>12.3f} {row['ratio']:>7.3f}"
        )


if __name__ == "__main__":
    main()

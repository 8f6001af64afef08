"""``codemode audit``: query the audit log (every tool call, denials included)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.cli.options import add_config_argument

if TYPE_CHECKING:
    from codemode.audit import AuditEvent

HELP = "show the audit log of tool calls (who called what, the decision and the outcome)"

AUDIT_FILE_NAME = "audit.sqlite"
_DECISIONS = ("allow", "deny", "ask-approved", "ask-denied", "budget")
_OUTCOMES = ("ok", "error", "denied")
_RELATIVE_RE = re.compile(r"^-?(\d+(?:\.\d+)?)([smhdw])$")
# argparse takes "-1h" for an option unless it looks like a negative number to the parser.
_NEGATIVE_VALUE_RE = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d+(?:\.\d+)?[smhdw]$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    if hasattr(parser, "_negative_number_matcher"):  # so that `--since -1h` parses
        parser._negative_number_matcher = _NEGATIVE_VALUE_RE
    add_config_argument(parser)
    parser.add_argument("--session", metavar="S", help="only this session")
    parser.add_argument("--tool", metavar="GLOB", help='only tools matching "server.tool" glob')
    parser.add_argument(
        "--since",
        metavar="ISO|-1h",
        help="only calls since a time (ISO 8601) or a duration ago (-30m, 2h, -7d)",
    )
    parser.add_argument("--decision", choices=_DECISIONS, help="only calls with this decision")
    parser.add_argument("--outcome", choices=_OUTCOMES, help="only calls with this outcome")
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="newest N (default 50)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def parse_since(text: str, *, now: float) -> float:
    """A duration ago (``-90s``, ``30m``, ``-1h``, ``2d``, ``1w``; the sign is optional) or an
    ISO 8601 time (local time when it has no zone)."""
    from datetime import datetime

    from codemode.errors import UsageError

    relative = _RELATIVE_RE.match(text.strip())
    if relative:
        return now - float(relative.group(1)) * _UNIT_S[relative.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a time nor a duration ago",
            fix="write e.g. --since -1h, --since 2d or --since 2026-01-31T09:00",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()


def audit_path(config_path: Path | None) -> Path:
    from codemode.config import load_config

    return load_config(config_path).gateway.state_dir / AUDIT_FILE_NAME


def run(args: argparse.Namespace) -> int:
    import time

    from codemode.audit import AuditFilter, SQLiteAuditLog
    from codemode.errors import UsageError

    if args.limit < 1:
        raise UsageError("--limit must be at least 1", fix="e.g. --limit 100")
    since = parse_since(args.since, now=time.time()) if args.since else None
    filters = AuditFilter(
        session=args.session,
        tool=args.tool,
        since=since,
        decision=args.decision,
        outcome=args.outcome,
        limit=args.limit,
    )
    if shared := _shared_store(args.config):  # replicas write one log in the shared store
        from codemode.replicas.audit import shared_audit_events

        return _show(args, shared, shared_audit_events(shared, filters), exists=True)
    path = audit_path(args.config)
    events = []
    if path.exists():
        with SQLiteAuditLog(path) as log:
            events = log.query(filters)
    return _show(args, str(path), events, exists=path.exists())


def _shared_store(config_path: Path | None) -> str | None:
    from codemode.config import load_config

    return load_config(config_path).gateway.shared_store


def _show(args: argparse.Namespace, path: str, events: list[AuditEvent], *, exists: bool) -> int:
    import json

    if args.json:
        document: dict[str, Any] = {
            "path": path,
            "count": len(events),
            "events": [event.to_dict() for event in events],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return 0
    if not exists:
        print(f"no audit log yet at {path} (it starts with the first tool call)", file=sys.stderr)
        return 0
    if not events:
        print(f"no matching tool calls in {path}", file=sys.stderr)
        return 0
    for event in events:
        print(_line(event.to_dict()))
    return 0


def _line(event: dict[str, Any]) -> str:
    parts = [
        event["time"],
        event["session"],
        f"{event['server']}.{event['tool']}",
        event["decision"],
        event["outcome"],
        f"{event['duration_ms']:.0f}ms",
    ]
    if event["error_code"]:
        parts.append(event["error_code"])
    if event["message"]:
        parts.append(event["message"])
    return "  ".join(parts)

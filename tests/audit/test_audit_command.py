"""``codemode audit``: filters, text and --json output, a missing log, bad --since values."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.audit import AuditEvent, SQLiteAuditLog
from codemode.cli import audit_command
from codemode.errors import UsageError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    audit_command.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "codemode.toml"
    path.write_text('[gateway]\nstate_dir = "state"\n', encoding="utf-8")
    return path


def fill(config: Path) -> float:
    """Four events at fixed ages before now (relative --since values count from now, so the
    rows are dated when a test runs, not when the module was imported). Returns now."""
    now = time.time()
    rows = [
        (now - 7200, "s1", "crm", "search", "allow", "ok", None, ""),
        (now - 600, "s1", "crm", "delete_contact", "deny", "denied", "policy_denied", "denied"),
        (now - 60, "s2", "mail", "send_email", "ask-approved", "ok", None, ""),
        (now - 30, "s2", "mail", "send_email", "budget", "denied", "budget_exhausted", "spent"),
    ]
    with SQLiteAuditLog(config.parent / "state" / "audit.sqlite") as log:
        for at, session, server, tool, decision, outcome, code, message in rows:
            log.append(
                AuditEvent(
                    at,
                    session,
                    server,
                    tool,
                    "sha256:ab",
                    decision,  # type: ignore[arg-type]
                    1.5,
                    outcome,  # type: ignore[arg-type]
                    code,
                    message,
                )
            )
    return now


def run_json(config: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert audit_command.run(parse(["--config", str(config), "--json", *argv])) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_json_shape(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(config)
    document = run_json(config, capsys=capsys)
    assert document["path"] == str(config.parent / "state" / "audit.sqlite")
    assert document["count"] == 4
    events = document["events"]
    assert isinstance(events, list)
    assert set(events[0]) == {
        "time",
        "session",
        "server",
        "tool",
        "args_digest",
        "decision",
        "duration_ms",
        "outcome",
        "error_code",
        "message",
        "rule",
        "count",
    }
    assert events[0]["count"] == 1
    assert events[0]["tool"] == "search"  # oldest first
    assert events[0]["time"].endswith("Z")


@pytest.mark.parametrize(
    ("argv", "tools"),
    [
        (["--session", "s2"], ["send_email", "send_email"]),
        (["--tool", "crm.*"], ["search", "delete_contact"]),
        (["--decision", "deny"], ["delete_contact"]),
        (["--outcome", "denied"], ["delete_contact", "send_email"]),
        (["--since", "-1h"], ["delete_contact", "send_email", "send_email"]),
        (["--since", "-2m"], ["send_email", "send_email"]),
        (["--since", "2m"], ["send_email", "send_email"]),
        (["--since=-2m"], ["send_email", "send_email"]),
        (["--limit", "1"], ["send_email"]),
        (["--session", "s1", "--decision", "budget"], []),
    ],
)
def test_filters(
    config: Path, argv: list[str], tools: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fill(config)
    document = run_json(config, *argv, capsys=capsys)
    assert [e["tool"] for e in document["events"]] == tools


def test_since_iso(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = fill(config)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now - 120))
    document = run_json(config, "--since", iso, capsys=capsys)
    assert document["count"] == 2


def test_text_output(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(config)
    assert audit_command.run(parse(["--config", str(config), "--decision", "deny"])) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert "s1  crm.delete_contact  deny  denied  2ms  policy_denied  denied" in out[0]


def test_missing_log_is_not_an_error_and_is_not_created(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit_command.run(parse(["--config", str(config)])) == 0
    assert "no audit log yet" in capsys.readouterr().err
    assert run_json(config, capsys=capsys)["events"] == []
    assert not (config.parent / "state" / "audit.sqlite").exists()


@pytest.mark.parametrize("value", ["yesterday", "-1y", "1x"])
def test_bad_since(config: Path, value: str) -> None:
    with pytest.raises(UsageError, match="--since"):
        audit_command.run(parse(["--config", str(config), f"--since={value}"]))


def test_bad_limit(config: Path) -> None:
    with pytest.raises(UsageError, match="--limit"):
        audit_command.run(parse(["--config", str(config), "--limit", "0"]))


def test_parse_since_units() -> None:
    assert audit_command.parse_since("-90s", now=1000.0) == 910.0
    assert audit_command.parse_since("-1.5h", now=10000.0) == 10000.0 - 5400
    assert audit_command.parse_since("-2d", now=200000.0) == 200000.0 - 172800
    assert audit_command.parse_since("1970-01-01T00:01:00Z", now=0) == 60.0

"""Bearer tokens: where they come from, and the ASGI check in front of the HTTP app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemode.config import load_config
from codemode.errors import ConfigError
from codemode.gateway.auth import (
    OWNER_SCOPE_KEY,
    BearerAuth,
    TokenTable,
    parse_token_list,
    resolve_tokens,
)

pytestmark = pytest.mark.anyio


def test_token_lists_name_owners_and_a_bare_token_is_default() -> None:
    assert parse_token_list("alice=a1, bob = b2,,bare") == [
        ("alice", "a1"),
        ("bob", "b2"),
        ("default", "bare"),
    ]


def test_tokens_from_config_environment_and_flags_all_count() -> None:
    table = resolve_tokens({"alice": "a1"}, {"CODEMODE_TOKENS": "bob=b2"}, ["carol=c3", "d4"])
    assert [table.owner_of(t) for t in ("a1", "b2", "c3", "d4")] == [
        "alice",
        "bob",
        "carol",
        "default",
    ]
    assert table.owner_of("a1 ") is None and table.owner_of("") is None
    assert table.generated is None


def test_with_no_token_anywhere_one_is_generated() -> None:
    first, second = resolve_tokens({}, {}, []), resolve_tokens({}, {}, [])
    assert first.generated and second.generated and first.generated != second.generated
    assert len(first.generated) >= 40
    assert first.owner_of(first.generated) == "default"


def test_an_empty_token_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        TokenTable.build([("alice", "")])


def test_config_tokens_expand_environment_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALICE_TOKEN", "from-the-environment")
    path = tmp_path / "codemode.toml"
    path.write_text(
        "[gateway]\nmax_sessions_per_client = 3\nprogress_interval_s = 0.5\n\n"
        '[gateway.tokens]\nalice = "${ALICE_TOKEN}"\n'
    )
    gateway = load_config(path).gateway
    assert dict(gateway.tokens) == {"alice": "from-the-environment"}
    assert gateway.max_sessions_per_client == 3 and gateway.progress_interval_s == 0.5


async def _call(headers: list[tuple[bytes, bytes]]) -> tuple[list[Any], list[Any]]:
    seen: list[Any] = []
    sent: list[Any] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope.get(OWNER_SCOPE_KEY))

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    await BearerAuth(inner, [TokenTable.build([("alice", "a1")]).verify])(scope, receive, send)
    return seen, sent


async def test_the_check_passes_the_owner_on_and_refuses_everything_else() -> None:
    seen, sent = await _call([(b"authorization", b"Bearer a1")])
    assert seen == ["alice"] and sent == []
    for headers in ([], [(b"authorization", b"Bearer a2")], [(b"authorization", b"Basic a1")]):
        seen, sent = await _call(headers)
        assert seen == []
        assert sent[0]["status"] == 401
        assert (b"www-authenticate", b'Bearer realm="codemode", error="invalid_token"') in sent[0][
            "headers"
        ]


def test_an_oauth_section_needs_its_server_and_resource(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text('[gateway.oauth]\nissuer = "https://login.example.com"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "gateway.oauth" in str(refused.value)
    assert "introspection_url" in str(refused.value) or "resource" in str(refused.value)

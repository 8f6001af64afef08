"""The gateway end to end: the official MCP client against `codemode serve`, stdio and HTTP.

One gateway process per transport for the whole module, with upstreams docs + crm (demo),
server-memory + server-filesystem (third-party) and our fake server (crashes on demand).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.demo import MEETING_DOCUMENT_ID
from codemode.search.encoder import semantic_available

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]


@pytest.fixture(scope="module", params=["stdio", "http"])
async def gateway(
    request: pytest.FixtureRequest, gateway_dirs: Any, harness: Any
) -> AsyncIterator[Any]:
    async with harness.open_gateway(request.param, gateway_dirs) as opened:
        yield opened


async def test_lists_the_meta_tools_and_nothing_else(gateway: Any) -> None:
    from codemode.gateway.meta_tools import tool_definitions

    listed = await gateway.client.list_tools()
    names = [tool.name for tool in listed.tools]
    assert names[:2] == ["search", "execute"]
    # Exactly the measured definitions, not one of the upstreams' 39 tools.
    wire = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]
    # approve carries annotations (clients confirm it with their user); they are not context.
    annotations = {entry["name"]: entry.pop("annotations", None) for entry in wire}
    assert wire == tool_definitions()
    assert annotations["approve"]["destructiveHint"] is True
    assert not {"get_document", "create_entities", "write_file", "crash"} & set(names)


async def test_search_finds_a_demo_tool_and_a_third_party_tool(gateway: Any, harness: Any) -> None:
    # The gateway builds its index in the background; until then answers are lexical only.
    result = await harness.search_when_indexed(
        gateway.client, {"query": "read a meeting transcript document"}
    )
    assert not result.is_error
    names = [hit["python_name"] for hit in harness.structured(result)["hits"]]
    if semantic_available():
        assert names[0] == "docs.get_document"
    else:  # lexical only (no [semantic] extra): "document" matches list_documents as well
        assert "docs.get_document" in names[:3]
    assert "docs.get_document(document_id: str)" in harness.text_of(result)

    result = await gateway.client.call_tool(
        "search", {"query": "create entities in the knowledge graph", "limit": 3}
    )
    names = [hit["python_name"] for hit in harness.structured(result)["hits"]]
    assert len(names) == 3 and names[0] == "memory.create_entities"


async def test_execute_chains_a_demo_server_into_server_memory(gateway: Any, harness: Any) -> None:
    entity = f"transcript-{gateway.transport}-{secrets.token_hex(4)}"
    code = f"""\
from servers import docs, memory
doc = docs.get_document(document_id="{MEETING_DOCUMENT_ID}")
memory.create_entities(entities=[{{
    "name": "{entity}", "entityType": "transcript", "observations": [doc["content"]]}}])
back = memory.open_nodes(names=["{entity}"])["entities"][0]["observations"][0]
print(len(doc["content"]), back == doc["content"])
"""
    data = await harness.execute_ok(gateway.client, code)
    length, same = data["stdout"].split()
    assert int(length) > 100_000 and same == "True"
    assert data["tool_calls"]["count"] == 3
    # The transcript went through the sandbox, not through the client.
    assert len(data["text"]) < 1000
    # server-memory really stored it: its file on the host holds the entity.
    assert f'"name":"{entity}"' in gateway.dirs.memory_file.read_text()


async def test_execute_writes_through_server_filesystem_after_approval(
    gateway: Any, harness: Any
) -> None:
    path = gateway.dirs.files / f"transcript-{gateway.transport}.txt"
    code = f"""\
import hashlib
from servers import docs, filesystem
doc = docs.get_document(document_id="{MEETING_DOCUMENT_ID}")
filesystem.write_file(path="{path}", content=doc["content"])
back = filesystem.read_text_file(path="{path}")["content"]
print(hashlib.sha256(doc["content"].encode()).hexdigest(), back == doc["content"])
"""
    paused = await harness.execute(gateway.client, code)
    # write_file is destructive: the default policy pauses before it, as a result, not an error.
    assert paused["status"] == "approval_required" and not paused["is_error"], paused["text"]
    assert paused["approval"]["tool"] == "filesystem.write_file"
    assert not path.exists()
    result = await gateway.client.call_tool(
        "approve", {"approval": paused["approval"]["id"], "allow": True}
    )
    data = harness.structured(result)
    assert data["status"] == "ok" and not result.is_error, harness.text_of(result)
    assert data["session"] == paused["session"]
    digest, same = data["stdout"].split()
    assert same == "True"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


async def test_a_denied_approval_raises_tool_error_in_the_code(gateway: Any, harness: Any) -> None:
    path = gateway.dirs.files / f"denied-{gateway.transport}.txt"
    code = f"""\
from servers import ToolError, filesystem
try:
    filesystem.write_file(path="{path}", content="no")
except ToolError as error:
    print("denied:", error)
"""
    paused = await harness.execute(gateway.client, code)
    assert paused["status"] == "approval_required", paused["text"]
    result = await gateway.client.call_tool(
        "approve", {"approval": paused["approval"]["id"], "allow": False}
    )
    data = harness.structured(result)
    assert data["status"] == "ok" and data["stdout"].startswith("denied:"), harness.text_of(result)
    assert not path.exists()


async def test_errors_come_back_as_structured_results(gateway: Any, harness: Any) -> None:
    data = await harness.execute(gateway.client, "x = 1\n\nraise ValueError('boom')\n")
    assert data["is_error"] and data["status"] == "error"
    assert data["error"]["type"] == "ValueError" and data["error"]["line"] == 3
    assert "error at line 3: ValueError: boom" in data["text"]

    data = await harness.execute(gateway.client, "print('a')\nif True print(1)\n")
    assert data["is_error"] and data["error"]["type"] == "SyntaxError"
    assert data["error"]["line"] == 2

    code = "from servers import docs\nprint('before')\ndocs.get_document(document_id='nope')\n"
    data = await harness.execute(gateway.client, code)
    assert data["is_error"] and data["error"]["type"] == "ToolError"
    assert data["error"]["line"] == 3 and "no document with id 'nope'" in data["error"]["message"]
    assert data["stdout"] == "before\n"
    assert data["tool_calls"]["failures"] == 1


async def test_sessions_are_isolated_and_persist_with_their_handle(
    gateway: Any, harness: Any
) -> None:
    client = gateway.client
    first = await harness.execute_ok(
        client, "secret = 'alpha'\nopen('note.txt', 'w').write('from A')\nprint('A')"
    )
    # Another client (over HTTP another token's owner; over stdio another gateway process).
    async with gateway.connect(headers=harness.bearer("alice")) as other:
        second = await harness.execute_ok(
            other, "import os\nprint('secret' in globals(), os.path.exists('note.txt'))"
        )
    assert first["session"] and second["session"]
    assert first["session"] != second["session"]
    assert second["stdout"] == "False False\n"

    again = await harness.execute_ok(
        client, "print(secret, open('note.txt').read())", session=first["session"]
    )
    assert again["stdout"] == "alpha from A\n"
    assert again["session"] == first["session"]
    # fresh=true keeps the handle but starts the interpreter over.
    fresh = await harness.execute_ok(
        client, "print('secret' in globals())", session=first["session"], fresh=True
    )
    assert fresh["stdout"] == "False\n" and fresh["session"] == first["session"]


async def test_a_2026_call_without_a_handle_opens_a_session_of_its_own(
    gateway: Any, harness: Any
) -> None:
    """A 2026-era request identifies no agent (one token or one stdio server may serve many):
    a call without a handle gets a new session, and passing its handle back continues it."""
    assert gateway.client.protocol_version == "2026-07-28"
    first = await harness.execute_ok(gateway.client, "kept = 1")
    other = await harness.execute_ok(gateway.client, "print('kept' in dir())")
    assert other["stdout"] == "False\n" and other["session"] != first["session"]
    data = await harness.execute_ok(gateway.client, "print(kept)", session=first["session"])
    assert data["stdout"] == "1\n" and data["session"] == first["session"]


async def test_an_unknown_tool_is_a_protocol_error(gateway: Any, harness: Any) -> None:
    from mcp import MCPError

    with pytest.raises(MCPError) as raised:
        await gateway.client.call_tool("delete_everything", {"code": "print(1)"})
    assert raised.value.error.code == -32602  # Invalid params, as the MCP spec shows
    assert "Unknown tool: 'delete_everything'" in raised.value.error.message
    await harness.execute_ok(gateway.client, "print('still serving')")


async def test_unknown_session_handle_is_a_clear_error(gateway: Any, harness: Any) -> None:
    handle = "s_" + secrets.token_urlsafe(18)
    result = await gateway.client.call_tool("execute", {"code": "print(1)", "session": handle})
    assert result.is_error
    text = harness.text_of(result)
    assert "unknown or expired session" in text and "omit `session`" in text
    assert result.structured_content is None  # nothing ran
    await harness.execute_ok(gateway.client, "print(1)")


async def test_a_crashed_upstream_is_restarted(gateway: Any, harness: Any) -> None:
    code = """\
from servers import ToolError, fake
before = fake.pid()
try:
    fake.crash()
except ToolError as error:
    print("crash:", error)
"""
    data = await harness.execute_ok(gateway.client, code)
    assert "crash: MCP server 'fake' failed during a call to 'crash'" in data["stdout"]
    after = await harness.execute_ok(
        gateway.client,
        "print(fake.add(a=2, b=3), fake.pid() != before)",
        session=data["session"],
    )
    assert after["stdout"] == "5 True\n"


async def test_a_killed_upstream_is_restarted(gateway: Any, harness: Any) -> None:
    data = await harness.execute_ok(gateway.client, "from servers import fake\nprint(fake.pid())")
    pid = int(data["stdout"])
    assert pid in harness.descendants(min(gateway.gateway_pids()))
    os.kill(pid, signal.SIGKILL)
    assert not harness.wait_until_gone({pid})
    code = "from servers import fake\nprint(fake.add(a=20, b=22), fake.pid())"
    data = await harness.execute(gateway.client, code)
    if data["status"] == "error":
        # A call that raced the connection's close gets the documented clear error (never a
        # hang, never a host traceback); the server is restarted for the next call.
        assert "failed during a call to 'add'" in data["text"], data["text"]
        data = await harness.execute_ok(gateway.client, code)
    assert data["status"] == "ok", data["text"]
    value, new_pid = data["stdout"].split()
    assert value == "42" and int(new_pid) != pid


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("execute", {}, "`code` must be a string"),
        ("execute", {"code": 5}, "`code` must be a string"),
        ("execute", {"code": "print(1)", "session": 7}, "`session` must be the string handle"),
        ("execute", {"code": "print(1)", "fresh": "yes"}, "`fresh` must be true or false"),
        ("search", {}, "`query` must be a non-empty string"),
        ("search", {"query": "x", "limit": 0}, "`limit` must be a positive integer"),
        ("search", {"query": "x", "detail": 3}, "`detail` must be one of"),
    ],
)
async def test_malformed_requests_get_errors_and_the_gateway_keeps_serving(
    gateway: Any, harness: Any, tool: str, arguments: dict[str, Any], message: str
) -> None:
    result = await gateway.client.call_tool(tool, arguments)
    assert result.is_error
    assert message in harness.text_of(result)
    data = await harness.execute_ok(gateway.client, "print(6 * 7)")
    assert data["stdout"] == "42\n"


async def test_a_2025_era_client_keeps_its_session_without_the_handle(
    gateway: Any, harness: Any
) -> None:
    async with gateway.connect(mode="legacy") as first, gateway.connect(mode="legacy") as other:
        assert first.protocol_version.startswith("2025")
        one = await harness.execute_ok(first, "counter = 41\nopen('mine.txt', 'w').write('x')")
        two = await harness.execute_ok(first, "counter += 1\nprint(counter)")
        assert two["stdout"] == "42\n" and two["session"] == one["session"]
        # Another 2025-era connection has a session of its own.
        theirs = await harness.execute_ok(
            other, "import os\nprint('counter' in globals(), os.path.exists('mine.txt'))"
        )
        assert theirs["stdout"] == "False False\n"
        assert theirs["session"] != one["session"]
        if gateway.http is None:
            return  # over stdio `other` is a gateway process of its own
        # An explicit handle still wins over the connection's session.
        data = await harness.execute(first, "print(counter)", session=theirs["session"])
        assert data["error"]["type"] == "NameError"

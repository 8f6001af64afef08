"""End to end through the official MCP client and a real `codemode serve` over stdio, with a
customers table served over MCP stdio: names that share words with addresses come back as
names, an honest batch of per-customer queries never pauses, a case-varied LIKE probe is
paused before a tenth of the address shows, and so is a GLOB probe that bisects each place
with character classes inside a query; an address sent in pieces to a server its flow rules
forbid is refused, and so are pieces spread over two such servers; an address a SQL tool
returns in hex comes back as its token."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.privacy.assertions import assert_no_pii
from codemode.privacy.recall import skeleton
from tests.gateway.conftest import client_for, execute, stdio_target, write_config
from tests.privacy.customers_server import customers

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).with_name("customers_server.py"))
SECRET = "jordan.blake@acme.example.com"
# Each execution without a handle is a session of its own: each test's code first reads the
# customers, so its session holds their addresses (as tokens) before it probes or sends.
READ_ALL = "rows = customers.read_query(query='SELECT id, name, email FROM customers')['rows']\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    root = tmp_path_factory.mktemp("probes")
    upstreams = {name: [sys.executable, SERVER, name] for name in ("customers", "mail", "chat")}
    # The default budgets: honest batches must run under them.
    config = write_config(root, upstreams, pool_size=1)
    async with client_for(stdio_target(config)) as client:
        yield client


async def test_names_that_share_words_with_addresses_come_back_as_names(client: Any) -> None:
    code = (
        "from servers import customers\n"
        "rows = customers.read_query(query='SELECT id, name, email FROM customers')['rows']\n"
        "print(';'.join(f\"{row['id']}:{row['name']}\" for row in rows))\n"
        "print(sum(row['email'].startswith('<EMAIL_') for row in rows))\n"
        "print(customers.read_query(query=\"SELECT 'Kofi Okafor' AS name\")['rows'][0]['name'])\n"
    )
    data = await execute(client, code)
    assert data["status"] == "ok", data["text"]
    names, tokens, alone = data["stdout"].splitlines()
    assert names.split(";") == [f"{number}:{name}" for number, name, _ in customers()]
    assert tokens == "60" and alone == "Kofi Okafor"
    assert_no_pii(data["text"])


async def test_an_honest_batch_of_per_customer_queries_never_pauses(client: Any) -> None:
    # 240 queries in well under a minute, under the default budgets (60 a minute refused the
    # 61st before).
    code = (
        "from servers import customers\n" + READ_ALL + "for number in [*range(1, 61)] * 4:\n"
        "    query = f'SELECT name, email FROM customers WHERE id = {number}'\n"
        "    row = customers.read_query(query=query)['rows'][0]\n"
        "print('done')\n"
    )
    data = await execute(client, code)
    assert data["status"] == "ok" and data["stdout"] == "done\n", data["text"]


PROBE = (
    "from servers import customers\n"
    + READ_ALL
    + """known = ''
for _ in range(40):
    for char in 'abcdefghijklmnopqrstuvwxyz0123456789.@-':
        guess = ''.join(c.upper() if i % 2 else c for i, c in enumerate(known + char))
        if customers.email_matches(customer_id=1, pattern=guess + '%')['matches']:
            known += char
            break
    else:
        break
print('rebuilt', len(known))
"""
)


async def test_a_case_varied_probe_is_paused_before_a_tenth_shows(client: Any) -> None:
    paused = await execute(client, PROBE)
    assert paused["status"] == "approval_required", paused["text"]
    approval = paused["approval"]
    assert approval["tool"] == "customers.email_matches"
    guess = approval["arguments"]["pattern"]
    assert len(skeleton(guess)) - 1 < 0.1 * len(skeleton(SECRET)), guess  # before this call
    assert "<EMAIL_1>" in approval["reason"]
    denied = await client.call_tool("approve", {"approval": approval["id"], "allow": False})
    assert denied.structured_content["status"] == "error"
    assert "Pass <EMAIL_1> itself" in denied.structured_content["error"]["message"]
    assert "rebuilt" not in denied.structured_content.get("stdout", "")


def assert_pieces_refused(data: dict[str, Any]) -> None:
    """Refused before the pieces sent show a run of the address the code did not know."""
    assert data["status"] == "error", data["text"]
    assert "pieces of <EMAIL_" in data["error"]["message"]
    sent = [line.split()[1] for line in data["stdout"].splitlines()]
    hidden = skeleton("".join(sent)).replace("jordanblake", "")  # the name was seen in clear
    assert len(sent) < 4 and len(hidden) < 10, sent
    assert_no_pii(data["text"])


async def test_an_address_sent_in_pieces_to_a_forbidden_server_is_refused(client: Any) -> None:
    code = (
        "from servers import customers, mail\n"
        + READ_ALL
        + "for piece in ['jordan.', 'blake@a', 'cme.exa', 'mple.com']:\n"
        "    mail.send(to='team', body=piece)\n"
        "    print('sent', piece)\n"
    )
    assert_pieces_refused(await execute(client, code))


GLOB_PROBE = (
    "from servers import customers\n"
    + READ_ALL
    + """chars = sorted('abcdefghijklmnopqrstuvwxyz0123456789.@-')
known = ''
for place in range(40):
    low, high = 0, len(chars)
    while high - low > 1:
        middle = (low + high) // 2
        members = ''.join(c for c in chars[low:middle] if c != '-') + '-' * ('-' in chars[low:middle])
        query = f"SELECT id FROM customers WHERE id = 1 AND email GLOB '{'?' * place}[{members}]*'"
        if customers.read_query(query=query)['rows']:
            high = middle
        else:
            low = middle
    known += chars[low]
print('rebuilt', len(known))
"""
)


async def test_a_glob_probe_with_character_classes_is_paused_before_a_tenth_shows(
    client: Any,
) -> None:
    paused = await execute(client, GLOB_PROBE)
    assert paused["status"] == "approval_required", paused["text"]
    approval = paused["approval"]
    assert approval["tool"] == "customers.read_query"
    places = approval["arguments"]["query"].split("'")[1].count("?")
    hidden = max(0, places - len("jordan.blake"))  # the name was seen in clear
    assert hidden < 0.1 * len(skeleton(SECRET)), approval["arguments"]
    denied = await client.call_tool("approve", {"approval": approval["id"], "allow": False})
    assert denied.structured_content["status"] == "error"
    assert "rebuilt" not in denied.structured_content.get("stdout", "")


async def test_pieces_spread_over_two_forbidden_servers_are_refused(client: Any) -> None:
    code = (
        "from servers import customers, mail, chat\n"
        + READ_ALL
        + "for number, piece in enumerate(['jordan.', 'blake@a', 'cme.exa', 'mple.com']):\n"
        "    (chat if number % 2 else mail).send(to='team', body=piece)\n"
        "    print('sent', piece)\n"
    )
    assert_pieces_refused(await execute(client, code))


async def test_an_address_a_sql_tool_returns_in_hex_comes_back_as_its_token(client: Any) -> None:
    # SQLite's hex() hands the code the address in another shape; nothing in this session
    # read the address in clear before.
    code = (
        "from servers import customers\n"
        "query = 'SELECT hex(email) AS h FROM customers WHERE id = 1'\n"
        "hexed = customers.read_query(query=query)['rows'][0]['h']\n"
        "query = 'SELECT email FROM customers WHERE id = 1'\n"
        "plain = customers.read_query(query=query)['rows'][0]['email']\n"
        "print(hexed.startswith('<EMAIL_'), hexed == plain)\n"
    )
    data = await execute(client, code)
    assert data["status"] == "ok", data["text"]
    assert data["stdout"] == "True True\n"
    assert SECRET.encode().hex().upper() not in data["text"]

"""The call check: wrong calls on generated functions are found before anything runs."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.checks import SignatureTable, check_calls
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.tools import ToolSpec

SPECS = [
    ToolSpec(
        "crm",
        "get_lead",
        input_schema={
            "type": "object",
            "properties": {"lead_id": {"type": "string"}, "with_notes": {"type": "boolean"}},
            "required": ["lead_id"],
        },
    ),
    ToolSpec(
        "crm",
        "listLeads",
        input_schema={
            "type": "object",
            "properties": {"limit": {"type": "integer"}, "dry-run": {"type": "boolean"}},
        },
    ),
    ToolSpec("my-docs", "search", input_schema={"type": "object", "properties": {}}),
]
TABLE = SignatureTable.from_specs(SPECS)


def problems(code: str) -> list[str]:
    return [str(problem) for problem in check_calls(code, TABLE)]


def test_correct_calls_in_every_import_form_pass() -> None:
    code = (
        "from servers import crm, my_docs\n"
        "import servers\n"
        "import servers.crm as c\n"
        "from servers.crm import get_lead as gl\n"
        "crm.get_lead(lead_id='L1', with_notes=True)\n"
        "servers.crm.list_leads(limit=5, dry_run=False)\n"
        "c.get_lead(lead_id='L2')\n"
        "gl(lead_id='L3')\n"
        "my_docs.search()\n"
        "await crm.get_lead.aio(lead_id='L4')\n"
        "crm.get_lead(**{'lead_id': 'x'})\n"
    )
    assert problems(code) == []


def test_a_misspelt_keyword_gets_its_line_and_a_suggestion() -> None:
    code = "from servers import crm\nx = 1\ncrm.get_lead(lead_idd='L1')\n"
    assert problems(code) == [
        "line 3: crm.get_lead() has no argument 'lead_idd'; did you mean 'lead_id'?",
        "line 3: crm.get_lead() is missing required argument(s): lead_id",
    ]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            "from servers import crm\ncrm.get_leed(lead_id='x')",
            "has no tool 'get_leed'; did you mean 'get_lead'?",
        ),
        ("from servers import crmm", "no server 'crmm'; did you mean 'crm'?"),
        (
            "from servers.crm import list_lead",
            "has no tool 'list_lead'; did you mean 'list_leads'?",
        ),
        ("from servers import crm\ncrm.get_lead('L1')", "takes keyword arguments only"),
        (
            "from servers import crm\ncrm.list_leads(limit='5')",
            "limit='5' is a string, but it takes integer",
        ),
        (
            "from servers import crm\ncrm.get_lead(lead_id=7)",
            "lead_id=7 is a integer, but it takes string",
        ),
        ("import servers\nservers.crm.get_lead()", "missing required argument(s): lead_id"),
        (
            "from servers import crm\nawait crm.get_lead.aio(lead_id='x', with_note=True)",
            "has no argument 'with_note'; did you mean 'with_notes'?",
        ),
        (
            "from servers.crm import get_lead\nawait get_lead.aio(lead_id=7)",
            "lead_id=7 is a integer, but it takes string",
        ),
        (
            "import servers\nawait servers.crm.get_leed.aio(lead_id='x')",
            "has no tool 'get_leed'; did you mean 'get_lead'?",
        ),
    ],
)
def test_each_kind_of_wrong_call_is_found(code: str, expected: str) -> None:
    found = problems(code)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    "code",
    [
        "from servers import crm\ncrm = object()\ncrm.anything(1)",
        "from servers import crm\ndef f(crm):\n    return crm.anything(1)",
        "from servers import crm\nfor crm in [1]:\n    crm.real(2)",
        "from servers import crm\n[crm.x() for crm in []]",
        "crm.get_lead(bad=1)",
        "this is not python",
    ],
)
def test_code_it_cannot_follow_is_left_alone(code: str) -> None:
    assert problems(code) in (
        [],
        ["line 3: crm.list_leads(): limit=2.5 is a number, but it takes integer"][:0],
    )


def test_a_float_for_an_integer_is_flagged_but_an_int_for_a_number_is_not() -> None:
    number = SignatureTable.from_specs(
        [
            ToolSpec(
                "m", "f", input_schema={"type": "object", "properties": {"x": {"type": "number"}}}
            )
        ]
    )
    assert check_calls("from servers import m\nm.f(x=3)", number) == []
    assert problems("from servers import crm\ncrm.list_leads(limit=2.5)") == [
        "line 2: crm.list_leads(): limit=2.5 is a number, but it takes integer"
    ]


@pytest.mark.anyio
async def test_the_engine_stops_a_wrong_call_before_any_upstream_call(shop: Any) -> None:
    from codemode.config import CodemodeConfig
    from codemode.sandbox.inprocess import InProcessSandboxes

    catalog = Catalog([PythonConnector("shop", shop.functions())])
    config = CodemodeConfig(servers={})
    async with Codemode(
        config, catalog=catalog, sandboxes=InProcessSandboxes(), semantic=False, audit=False
    ) as engine:
        code = "from servers import shop\nprint('ran')\nshop.place_order(item='pear', quantiy=1)\n"
        result = await engine.execute(code)
        assert result.status == "error" and result.stdout == ""
        assert result.error is not None
        assert result.error["type"] == "CallCheckError" and result.error["line"] == 3
        assert "did you mean 'quantity'?" in result.error["message"]
        assert result.tool_calls["count"] == 0 and shop.orders == []
        unchecked = await engine.execute(code, check=False)
        assert unchecked.stdout == "ran\n" and unchecked.status == "error"
        assert shop.orders == []  # the upstream refused the unknown keyword itself


def test_calls_are_found_wherever_statements_and_expressions_nest() -> None:
    """The walk visits every field that can hold code (match cases, f-strings, decorators,
    class bodies, ``global`` lists of plain names beside them), not only the common ones."""
    code = (
        "from servers import crm\n"
        "global seen\n"
        "match command:\n"
        "    case {'go': 1}:\n"
        "        crm.get_lead(lead_idd='a')\n"
        'print(f"{crm.get_lead(lead_id=1)!r}")\n'
        "@decorate(crm.list_leads(limt=1))\n"
        "class Handler:\n"
        "    limit: int = crm.get_lead()\n"
    )
    assert problems(code) == [
        "line 5: crm.get_lead() has no argument 'lead_idd'; did you mean 'lead_id'?",
        "line 5: crm.get_lead() is missing required argument(s): lead_id",
        "line 6: crm.get_lead(): lead_id=1 is a integer, but it takes string",
        "line 7: crm.list_leads() has no argument 'limt'; did you mean 'limit'?",
        "line 9: crm.get_lead() is missing required argument(s): lead_id",
    ]


def test_an_argument_under_another_name_gets_the_one_left_unfilled() -> None:
    # 'sql' is no misspelling of 'query', but 'query' is the one required argument not given.
    table = SignatureTable.from_specs(
        [
            ToolSpec(
                "sqlite",
                "read_query",
                input_schema={
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["query"],
                },
            )
        ]
    )
    found = [
        str(p) for p in check_calls("from servers import sqlite\nsqlite.read_query(sql='x')", table)
    ]
    assert found == [
        "line 2: sqlite.read_query() has no argument 'sql'; did you mean 'query'?",
        "line 2: sqlite.read_query() is missing required argument(s): query",
    ]


def test_the_text_of_a_rejected_execution_lists_every_problem() -> None:
    from codemode.checks.result import rejected_result

    code = "from servers import crm\ncrm.get_lead(lead_idd='L1')\ncrm.list_lead()\n"
    found = check_calls(code, TABLE)
    text = rejected_result(found).render_text()
    assert len(found) == 3
    for problem in found:
        assert str(problem) in text  # each with its "did you mean", not only the first
    assert "did you mean 'lead_id'?" in text and "did you mean 'list_leads'?" in text


def test_a_standard_library_import_rebinding_a_server_name_is_not_checked() -> None:
    table = SignatureTable.from_specs(
        [ToolSpec("time", "get_current_time", input_schema={"type": "object", "properties": {}})]
    )
    code = (
        "from servers import time\n"
        "time.get_current_time()\n"
        "import time\n"
        "time.sleep(0)\n"
        "from servers import time as time_server\n"
        "from time import monotonic as time_server\n"
        "time_server()\n"
    )
    assert check_calls(code, table) == []


@pytest.mark.anyio
async def test_a_keyword_the_check_could_not_follow_still_gets_its_did_you_mean(
    shop: Any,
) -> None:
    from codemode.config import CodemodeConfig
    from codemode.sandbox.inprocess import InProcessSandboxes

    catalog = Catalog([PythonConnector("shop", shop.functions())])
    async with Codemode(
        CodemodeConfig(servers={}),
        catalog=catalog,
        sandboxes=InProcessSandboxes(),
        semantic=False,
        audit=False,
    ) as engine:
        # Through a dict the check does not follow: Python raises the TypeError itself.
        code = "from servers import shop\nfns = {'o': shop.place_order}\nfns['o'](item='x', quantiy=1)\n"
        result = await engine.execute(code)
    assert result.error is not None and result.error["type"] == "TypeError", result.render_text()
    assert "did you mean 'quantity'? (place_order() takes item, quantity)" in result.render_text()
    assert shop.orders == []

"""The built-in demo: the seed articles' scenario end to end through the real gateway.

An official MCP client starts ``codemode serve`` over stdio (with the demo servers as its
upstreams, on a fresh copy of the sample data) and runs two tasks with FIXED agent code (no
model is involved, so no API key is needed). For each task it prints a ledger, counted with
the o200k tokenizer, of what a tool-calling agent would push through its context against what
codemode moved.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode.demo import ACME_LEAD_ID, MEETING_DOCUMENT_ID, server_commands
from codemode.tokens import count_tokens

__all__ = ["Baseline", "LedgerLine", "TaskLedger", "run_demo"]

TRANSCRIPT_TASK_CODE = f"""\
from servers import docs, crm
doc = docs.get_document(document_id="{MEETING_DOCUMENT_ID}")
lead = crm.get_lead(lead_id="{ACME_LEAD_ID}")
crm.update_lead(lead_id=lead["id"], fields={{"notes": doc["content"]}})
check = crm.get_lead(lead_id=lead["id"])
print(f"copied {{len(doc['content']):,}} characters into {{lead['company']}}'s notes:",
      check["notes"] == doc["content"])
"""

FILTER_TASK_CODE = """\
from servers import crm
rows = crm.search_leads(limit=500)["leads"]
hot = [r for r in rows if r["stage"] in ("Negotiation", "Proposal") and r["deal_value"] >= 150_000]
top = sorted(hot, key=lambda r: r["deal_value"], reverse=True)[:5]
print(f"{len(rows)} leads -> {len(hot)} late-stage deals >= $150k; top 5:")
for r in top:
    print(f"  {r['id']}  {r['company']:<28} {r['stage']:<12} ${r['deal_value']:>11,}")
"""

PRIVACY_TASK_CODE = """\
from servers import crm, mail
contacts = crm.list_contacts(industry="Retail", limit=200)["contacts"]
for c in contacts:
    mail.add_subscriber(list_name="retail-webinar", email=c["email"], name=c["name"])
count = mail.list_subscribers(list_name="retail-webinar")["count"]
print(f"added {len(contacts)} retail contacts; retail-webinar has {count} subscribers")
first = contacts[0]
print("the first as the code sees it:", first["name"], first["email"], first["phone"])
"""


SKILL_SAVE_CODE = """\
from servers import crm
from skills import save

def late_stage_deals(min_value: int, limit: int = 5) -> list[dict]:
    \"\"\"The biggest CRM deals in Negotiation or Proposal worth at least min_value.\"\"\"
    rows = crm.search_leads(limit=500)["leads"]
    hot = [r for r in rows if r["stage"] in ("Negotiation", "Proposal")
           and r["deal_value"] >= min_value]
    return sorted(hot, key=lambda r: r["deal_value"], reverse=True)[:limit]

TESTS = \"\"\"
from skills import late_stage_deals

def test_sorted_and_bounded():
    deals = late_stage_deals(150_000, limit=3)
    assert len(deals) <= 3
    values = [d["deal_value"] for d in deals]
    assert values == sorted(values, reverse=True)

def test_threshold():
    assert all(d["deal_value"] >= 400_000 for d in late_stage_deals(400_000))
\"\"\"
print(save(late_stage_deals, tests=TESTS))
"""

# The next task as a model writes it when it has no skills: the same function again.
_FUNCTION_ONLY = SKILL_SAVE_CODE.split("TESTS =", maxsplit=1)[0]
SKILL_AGAIN_CODE = _FUNCTION_ONLY.replace("from skills import save\n", "") + (
    "for d in late_stage_deals(250_000, limit=3):\n"
    "    print(d['id'], d['company'], d['deal_value'])\n"
)

SKILL_REUSE_CODE = """\
from skills import late_stage_deals
for d in late_stage_deals(250_000, limit=3):
    print(d["id"], d["company"], d["deal_value"])
"""


@dataclass
class LedgerLine:
    what: str
    tokens: int


@dataclass
class TaskLedger:
    title: str
    tool_calling: list[LedgerLine] = field(default_factory=list)
    codemode: list[LedgerLine] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # What the two columns compare (tool calling vs codemode, unless a task says otherwise).
    baseline_heading: str = "tool calling (every definition and result in context)"
    codemode_heading: str = "codemode (search + execute; data stays in the sandbox)"

    @property
    def tool_calling_total(self) -> int:
        return sum(line.tokens for line in self.tool_calling)

    @property
    def codemode_total(self) -> int:
        return sum(line.tokens for line in self.codemode)

    @property
    def saving(self) -> float:
        return 1 - self.codemode_total / self.tool_calling_total

    def render(self) -> str:
        width = 58
        lines = [f"== {self.title} ({self.seconds:.1f} s)", self.output.rstrip(), *self.notes]
        lines.append("")
        lines.append(f"{self.baseline_heading:<{width}}tokens")
        lines += [f"  {line.what:<{width - 2}}{line.tokens:>8,}" for line in self.tool_calling]
        lines.append(f"  {'total':<{width - 2}}{self.tool_calling_total:>8,}")
        lines.append(f"{self.codemode_heading:<{width}}")
        lines += [f"  {line.what:<{width - 2}}{line.tokens:>8,}" for line in self.codemode]
        lines.append(f"  {'total':<{width - 2}}{self.codemode_total:>8,}")
        lines.append(
            f"{self.codemode_heading.split(' (')[0]} used {self.saving:.1%} fewer tokens "
            f"({self.tool_calling_total:,} -> {self.codemode_total:,})"
        )
        return "\n".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _tool_result_text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _gateway_env() -> dict[str, str]:
    """The SDK's default environment, plus PYTHONPATH: the gateway runs this codemode."""
    import os

    from mcp.client.stdio import get_default_environment

    env = get_default_environment()
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _write_config(directory: Path, data_dir: Path) -> Path:
    commands = server_commands(data_dir)
    lines = ["# Written by `codemode demo`: the built-in demo servers on a fresh data copy.", ""]
    for name in ("docs", "crm", "mail"):
        command, *args = commands[name]
        lines += [f"[servers.{name}]", f"command = {_json(command)}", f"args = {_json(args)}", ""]
    lines += [
        "[sandbox]",
        "pool_size = 1",
        "",
        "# The demo's state (audit log, saved skills) stays in its temporary directory.",
        "[gateway]",
        'state_dir = "state"',
        "",
        "# Values that look like PII are tokenized before the code sees them; these flows let",
        "# the transcript reach the CRM and CRM contacts reach the mailing tool.",
        "[privacy.flows]",
        'docs = ["crm"]',
        'crm = ["mail"]',
        "",
    ]
    path = directory / "codemode.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


async def run_demo(progress: Callable[[str], None] = print) -> list[TaskLedger]:
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory(prefix="codemode-demo-") as tmp:
        directory = Path(tmp)
        config = _write_config(directory, directory / "data")
        progress("Starting the codemode gateway (MCP over stdio) with the demo servers...")
        started = time.perf_counter()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "codemode", "serve", "--config", str(config)],
            cwd=str(directory),
            env=_gateway_env(),
        )
        async with Client(params) as client:
            listed = await client.list_tools()
            surface = count_tokens(
                _json([t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools])
            )
            progress(
                f"Gateway ready in {time.perf_counter() - started:.1f} s: tools "
                f"{', '.join(t.name for t in listed.tools)} ({surface} tokens)."
            )
            baseline = await _baseline(directory / "data")
            # Tool calling would have moved the transcript before codemode's run changed it.
            return [
                await _transcript_task(client, surface, baseline, progress),
                await _filter_task(client, surface, baseline, progress),
                await _privacy_task(client, surface, baseline, directory / "data", progress),
                await _skill_task(client, progress),
            ]


@dataclass
class Baseline:
    """What a tool-calling agent would put through its context, measured on the real servers."""

    definitions: list[dict[str, Any]]
    transcript: Any
    leads: Any
    contacts: Any
    mail_definitions: list[dict[str, Any]]


async def _baseline(data_dir: Path) -> Baseline:
    from mcp import Client, StdioServerParameters

    definitions: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "docs": ("get_document", {"document_id": MEETING_DOCUMENT_ID}),
        "crm": ("search_leads", {"limit": 500}),
    }
    for name, (tool, arguments) in calls.items():
        command, *args = server_commands(data_dir)[name]
        async with Client(StdioServerParameters(command=command, args=args)) as client:
            listed = (await client.list_tools()).tools
            definitions += [
                tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed
            ]
            result = await client.call_tool(tool, arguments)
            values[name] = result.structured_content or _tool_result_text(result)
            if name == "crm":
                contacts = await client.call_tool(
                    "list_contacts", {"industry": "Retail", "limit": 200}
                )
                values["contacts"] = contacts.structured_content
        command, *args = server_commands(data_dir)["mail"]
        async with Client(StdioServerParameters(command=command, args=args)) as client:
            mail = [
                tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                for tool in (await client.list_tools()).tools
            ]
    return Baseline(definitions, values["docs"], values["crm"], values["contacts"], mail)


async def _search(client: Any, query: str) -> int:
    result = await client.call_tool("search", {"query": query})
    return count_tokens(_json({"query": query})) + count_tokens(_tool_result_text(result))


async def _execute(
    client: Any, code: str, progress: Callable[[str], None] = print
) -> tuple[dict[str, Any], int, list[Any]]:
    """Run the code; approve (as the user) any call the policy pauses. Returns the final
    result, the tokens the model would have seen (its code, every result, its answers) and
    the raw MCP results."""
    result = await client.call_tool("execute", {"code": code})
    raw = [result]
    tokens = count_tokens(_json({"code": code})) + count_tokens(_tool_result_text(result))
    structured = result.structured_content or {}
    while structured.get("status") == "approval_required":
        approval = structured["approval"]
        progress(
            f"  paused before {approval['tool']} ({approval['reason'].split(';')[0]}); "
            "the user approves"
        )
        answer = {"approval": approval["id"], "allow": True}
        result = await client.call_tool("approve", answer)
        raw.append(result)
        tokens += count_tokens(_json(answer)) + count_tokens(_tool_result_text(result))
        structured = result.structured_content or {}
    if structured.get("status") != "ok":
        raise RuntimeError(f"demo code failed: {_tool_result_text(result)}")
    return structured, tokens, raw


async def _transcript_task(
    client: Any, surface: int, baseline: Baseline, progress: Callable[[str], None]
) -> TaskLedger:
    progress("Task 1: copy the Q3 review meeting transcript into the Acme Corp lead's notes.")
    ledger = TaskLedger("Task 1: meeting transcript -> CRM notes")
    started = time.perf_counter()
    searches = await _search(client, "read a meeting transcript document")
    searches += await _search(client, "update the notes of a CRM lead")
    result, execute_tokens, _ = await _execute(client, TRANSCRIPT_TASK_CODE, progress)
    ledger.seconds = time.perf_counter() - started
    ledger.output = result["stdout"]
    content = (
        baseline.transcript.get("content", "") if isinstance(baseline.transcript, dict) else ""
    )
    ledger.tool_calling = [
        LedgerLine(
            f"{len(baseline.definitions)} tool definitions (docs + crm)",
            count_tokens(_json(baseline.definitions)),
        ),
        LedgerLine(
            "transcript read: get_document result", count_tokens(_json(baseline.transcript))
        ),
        LedgerLine(
            "transcript written back: update_lead arguments",
            count_tokens(_json({"lead_id": ACME_LEAD_ID, "fields": {"notes": content}})),
        ),
    ]
    ledger.codemode = [
        LedgerLine("tool surface: search, execute, approve", surface),
        LedgerLine("2 searches: queries and answers", searches),
        LedgerLine("execute + approve: the code and its printed result", execute_tokens),
    ]
    return ledger


async def _filter_task(
    client: Any, surface: int, baseline: Baseline, progress: Callable[[str], None]
) -> TaskLedger:
    progress("Task 2: find the five biggest late-stage deals among all CRM leads.")
    ledger = TaskLedger("Task 2: a few hundred CRM rows filtered to five in the sandbox")
    started = time.perf_counter()
    searches = await _search(client, "list CRM leads with their stage and deal value")
    result, execute_tokens, _ = await _execute(client, FILTER_TASK_CODE, progress)
    ledger.seconds = time.perf_counter() - started
    ledger.output = result["stdout"]
    top5 = result["stdout"].splitlines()[1:]
    ledger.tool_calling = [
        LedgerLine(
            f"{len(baseline.definitions)} tool definitions (docs + crm)",
            count_tokens(_json(baseline.definitions)),
        ),
        LedgerLine(
            "search_leads result: every lead into context", count_tokens(_json(baseline.leads))
        ),
        LedgerLine("the model writes out the five it picked", count_tokens("\n".join(top5))),
    ]
    ledger.codemode = [
        LedgerLine("tool surface: search, execute, approve", surface),
        LedgerLine("1 search: query and answer", searches),
        LedgerLine("execute: the code and its printed result", execute_tokens),
    ]
    return ledger


async def _privacy_task(
    client: Any,
    surface: int,
    baseline: Baseline,
    data_dir: Path,
    progress: Callable[[str], None],
) -> TaskLedger:
    from codemode.privacy.assertions import find_pii

    progress("Task 3: copy the retail contacts from the CRM into a mailing list, privately.")
    ledger = TaskLedger("Task 3: CRM contacts -> mailing list, no PII in the model's context")
    started = time.perf_counter()
    answer = await client.call_tool("search", {"query": "add a subscriber to a mailing list"})
    searches = count_tokens(_tool_result_text(answer))
    result, execute_tokens, raw = await _execute(client, PRIVACY_TASK_CODE, progress)
    ledger.seconds = time.perf_counter() - started
    ledger.output = result["stdout"]
    # Everything the model received in this task, as the client got it (text and structure).
    seen = [_tool_result_text(answer)] + [
        _tool_result_text(r) + _json(r.structured_content) for r in raw
    ]
    leaks = [item for text in seen for item in find_pii(text, kinds=("EMAIL", "PHONE"))]
    delivered = _subscribers(data_dir / "mail.sqlite", "retail-webinar")
    ledger.notes = [
        f"email addresses or phone numbers in what the model saw: {len(leaks)}",
        f"real addresses the mailing tool received: {delivered} (e.g. "
        f"{_first_address(data_dir / 'mail.sqlite')})",
    ]
    contacts = baseline.contacts.get("contacts", []) if isinstance(baseline.contacts, dict) else []
    calls = [
        {"list_name": "retail-webinar", "email": c.get("email"), "name": c.get("name")}
        for c in contacts
    ]
    ledger.tool_calling = [
        LedgerLine(
            f"{len(baseline.definitions) + len(baseline.mail_definitions)} tool definitions",
            count_tokens(_json(baseline.definitions + baseline.mail_definitions)),
        ),
        LedgerLine(
            "list_contacts result, every email and phone", count_tokens(_json(baseline.contacts))
        ),
        LedgerLine(
            f"{len(calls)} add_subscriber calls (arguments)",
            sum(count_tokens(_json(call)) for call in calls),
        ),
    ]
    ledger.codemode = [
        LedgerLine("tool surface: search, execute, approve", surface),
        LedgerLine("1 search: query and answer", searches),
        LedgerLine("execute: the code and its printed result", execute_tokens),
    ]
    if leaks:
        raise RuntimeError(f"the model would have seen personal data: {leaks[:3]}")
    return ledger


async def _skill_task(client: Any, progress: Callable[[str], None]) -> TaskLedger:
    progress("Task 4: save the deal filter as a skill, then reuse it in the next task.")
    ledger = TaskLedger(
        "Task 4: a skill saved in one task is reused in the next",
        baseline_heading="without skills (the next task writes the code again)",
        codemode_heading="with the saved skill (search lists it; import it)",
    )
    started = time.perf_counter()
    saved, _, _ = await _execute(client, SKILL_SAVE_CODE, progress)
    query = "biggest late-stage CRM deals above a value"
    answer = await client.call_tool("search", {"query": query})
    listed = _tool_result_text(answer)
    if "skills.late_stage_deals" not in listed:
        raise RuntimeError(f"search did not list the saved skill:\n{listed}")
    reused, reuse_tokens, _ = await _execute(client, SKILL_REUSE_CODE, progress)
    again, again_tokens, _ = await _execute(client, SKILL_AGAIN_CODE, progress)
    ledger.seconds = time.perf_counter() - started
    ledger.output = saved["stdout"] + reused["stdout"]
    if reused["stdout"] != again["stdout"]:
        raise RuntimeError("the skill and the rewritten code disagree")
    search_tokens = count_tokens(_json({"query": query})) + count_tokens(listed)
    ledger.tool_calling = [
        LedgerLine("1 search: query and answer", search_tokens),
        LedgerLine("execute: the whole function again, and its result", again_tokens),
    ]
    ledger.codemode = [
        LedgerLine("1 search: the skill is listed beside the tools", search_tokens),
        LedgerLine("execute: import the skill, and its result", reuse_tokens),
    ]
    return ledger


def _subscribers(path: Path, list_name: str) -> int:
    import sqlite3

    with sqlite3.connect(path) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM subscribers WHERE list_name = ? AND email LIKE '%@%'",
            (list_name,),
        ).fetchone()
    return int(count)


def _first_address(path: Path) -> str:
    import sqlite3

    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT email FROM subscribers WHERE list_name = 'retail-webinar' ORDER BY rowid"
        ).fetchone()
    return str(row[0]) if row else "none"

"""Tasks over third-party MCP servers (server-memory, mcp-server-git, mcp-server-time), the
suite's warehouse server, and chains across several servers."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from typing import Any
from zoneinfo import ZoneInfo

from bench_refs import Results, answer, call, calls, execute, search, then
from bench_task import Task, expect, first_problem
from bench_world import GIT_COMMITS, World

# --- the knowledge graph ---------------------------------------------------------------------------


def _owner_counts(world: World) -> dict[str, int]:
    return dict(Counter(r["owner"] for r in world.rows("crm", "SELECT owner FROM leads")))


def _check_reps(world: World) -> str | None:
    entities, _ = world.memory_graph()
    reps = {e["name"]: e for e in entities if e.get("entityType") == "sales_rep"}
    wrong = [
        o
        for o, n in world.expected["owners"].items()
        if o not in reps or f"owns {n} leads" not in reps[o].get("observations", [])
    ]
    return expect(not wrong, f"missing or wrong sales_rep entities: {wrong[:4]}")


def _setup_reps(world: World) -> None:
    world.expected["owners"] = _owner_counts(world)


MEMORY_REPS = Task(
    id="memory_sales_reps",
    prompt="In the knowledge graph (memory server), create an entity of type sales_rep for every "
    "lead owner in the CRM, with the observation 'owns N leads' (N: how many leads they own).",
    setup=_setup_reps,
    check=_check_reps,
    codemode=lambda w: [
        search("create entities in the knowledge graph memory"),
        execute(
            "from collections import Counter\nfrom servers import crm, memory\n\n"
            "counts = Counter(r['owner'] for r in crm.search_leads(limit=500)['leads'])\n"
            "memory.create_entities(entities=[{'name': o, 'entityType': 'sales_rep', "
            "'observations': [f'owns {n} leads']} for o, n in sorted(counts.items())])\nprint(counts)",
            "Plan: count leads per owner, create one entity each in one call.",
        ),
        answer("One sales_rep entity per owner, with their lead count."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", limit=500),
        then(
            lambda r: call(
                "memory__create_entities",
                entities=[
                    {"name": o, "entityType": "sales_rep", "observations": [f"owns {n} leads"]}
                    for o, n in sorted(Counter(x["owner"] for x in r.json()["leads"]).items())
                ],
            )
        ),
        answer("One sales_rep entity per owner, with their lead count."),
    ],
)


def _top_open(leads: list[dict[str, Any]], n: int = 3) -> list[dict[str, Any]]:
    open_ = [r for r in leads if r["stage"] not in ("Closed Won", "Closed Lost")]
    return sorted(open_, key=lambda r: (-r["deal_value"], r["id"]))[:n]


def _check_companies(world: World) -> str | None:
    _, relations = world.memory_graph()
    top = _top_open([dict(r) for r in world.rows("crm", "SELECT * FROM leads")])
    wanted = {(r["company"], r["owner"]) for r in top}
    got = {(x["from"], x["to"]) for x in relations if x.get("relationType") == "owned_by"}
    return expect(wanted <= got, f"owned_by relations missing: {sorted(wanted - got)}")


MEMORY_COMPANIES = Task(
    id="memory_top_accounts",
    prompt="Put the three open CRM leads with the biggest deal values in the knowledge graph: an "
    "entity of type company for each (observation: its deal value), an entity of type "
    "sales_rep for its owner, and a relation 'owned_by' from the company to the owner.",
    check=_check_companies,
    codemode=lambda w: [
        search("create entities and relations in the knowledge graph"),
        execute(
            "from servers import crm, memory\n\ndef top_open(n=3):\n    rows = crm.search_leads(limit=500)['leads']\n"
            "    rows = [r for r in rows if r['stage'] not in ('Closed Won', 'Closed Lost')]\n"
            "    return sorted(rows, key=lambda r: (-r['deal_value'], r['id']))[:n]\n\ntop = top_open()\n"
            "memory.create_entities(entities=[{'name': r['company'], 'entityType': 'company', "
            "'observations': [f\"deal value ${r['deal_value']:,}\"]} for r in top] + "
            "[{'name': r['owner'], 'entityType': 'sales_rep', 'observations': []} for r in top])\n"
            "memory.create_relations(relations=[{'from': r['company'], 'to': r['owner'], "
            "'relationType': 'owned_by'} for r in top])\nprint([(r['company'], r['owner']) for r in top])",
            "Plan: top three open deals, entities for companies and owners, then relations.",
        ),
        answer("The three biggest open accounts are in the graph, owned_by their reps."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", limit=500),
        then(
            lambda r: calls(
                [
                    (
                        "memory__create_entities",
                        {
                            "entities": [
                                {
                                    "name": x["company"],
                                    "entityType": "company",
                                    "observations": [f"deal value ${x['deal_value']:,}"],
                                }
                                for x in _top_open(r.json()["leads"])
                            ]
                            + [
                                {"name": x["owner"], "entityType": "sales_rep", "observations": []}
                                for x in _top_open(r.json()["leads"])
                            ]
                        },
                    ),
                    (
                        "memory__create_relations",
                        {
                            "relations": [
                                {"from": x["company"], "to": x["owner"], "relationType": "owned_by"}
                                for x in _top_open(r.json()["leads"])
                            ]
                        },
                    ),
                ]
            )
        ),
        answer("The three biggest open accounts are in the graph, owned_by their reps."),
    ],
)

# --- the git repository -----------------------------------------------------------------------------


def _changelog(log_text: str) -> str:
    messages = re.findall(r"^Message: (.*)$", log_text, re.M)
    return "# Changelog\n\n" + "".join(f"- {m}\n" for m in messages)


def _check_changelog(world: World) -> str | None:
    subjects = [m for _, _, m in GIT_COMMITS]
    head = world.git("log", "-1", "--format=%s", "main").strip()
    try:
        content = world.git("show", "main:CHANGELOG.md")
    except Exception:  # noqa: BLE001 - not committed
        return "CHANGELOG.md is not committed on main"
    missing = [s for s in subjects if s not in content]
    return first_problem(
        expect(head == "Add changelog", f"main's last commit is {head!r}"),
        expect(not missing, f"CHANGELOG.md lacks {missing}"),
    )


CHANGELOG = Task(
    id="git_changelog",
    prompt="In the git repository {repo} (the repo/ folder of your workspace), write "
    "CHANGELOG.md listing the message of every commit so far, and commit it with the message "
    "'Add changelog'.",
    check=_check_changelog,
    codemode=lambda w: [
        search("git log, add and commit"),
        execute(
            "import re\nfrom servers import git\n\n"
            f"REPO = {str(w.repo)!r}\n\ndef messages():\n"
            "    log = git.git_log(repo_path=REPO, max_count=100)\n"
            "    return re.findall(r'^Message: (.*)$', log, re.M)\n\n"
            "found = messages()\nopen('repo/CHANGELOG.md', 'w').write('# Changelog\\n\\n' + ''.join(f'- {m}\\n' for m in found))\n"
            "git.git_add(repo_path=REPO, files=['CHANGELOG.md'])\n"
            "print(git.git_commit(repo_path=REPO, message='Add changelog'), found)",
            "Plan: read the log, write the file in the repo, add and commit.",
        ),
        answer("CHANGELOG.md is committed."),
    ],
    baseline=lambda w: [
        call("git__git_log", repo_path=str(w.repo), max_count=100),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.repo / "CHANGELOG.md"),
                content=_changelog(r.text()),
            )
        ),
        call("git__git_add", repo_path=str(w.repo), files=["CHANGELOG.md"]),
        call("git__git_commit", repo_path=str(w.repo), message="Add changelog"),
        answer("CHANGELOG.md is committed."),
    ],
)


def _check_typo(world: World) -> str | None:
    try:
        readme = world.git("show", "fix/typo:README.md")
        subject = world.git("log", "-1", "--format=%s", "fix/typo").strip()
    except Exception:  # noqa: BLE001 - no such branch
        return "there is no branch fix/typo"
    return first_problem(
        expect("receive" in readme and "recieve" not in readme, "README still has the typo"),
        expect(subject == "Fix typo in README", f"fix/typo's last commit is {subject!r}"),
    )


TYPO = Task(
    id="git_fix_typo_branch",
    prompt="In the git repository {repo} (the repo/ folder of your workspace), create a branch "
    "fix/typo, fix the misspelling 'recieve' in README.md on it, and commit with the message "
    "'Fix typo in README'.",
    check=_check_typo,
    codemode=lambda w: [
        search("git create branch, checkout, add, commit"),
        execute(
            "from servers import git\n\n"
            f"REPO = {str(w.repo)!r}\n"
            "git.git_create_branch(repo_path=REPO, branch_name='fix/typo')\n"
            "git.git_checkout(repo_path=REPO, branch_name='fix/typo')\n"
            "text = open('repo/README.md').read()\nopen('repo/README.md', 'w').write(text.replace('recieve', 'receive'))\n"
            "git.git_add(repo_path=REPO, files=['README.md'])\nprint(git.git_commit(repo_path=REPO, message='Fix typo in README'))",
            "Plan: branch, check it out, fix the word, add, commit.",
        ),
        answer("fix/typo has the corrected README."),
    ],
    baseline=lambda w: [
        call("git__git_create_branch", repo_path=str(w.repo), branch_name="fix/typo"),
        call("git__git_checkout", repo_path=str(w.repo), branch_name="fix/typo"),
        call("filesystem__read_text_file", path=str(w.repo / "README.md")),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.repo / "README.md"),
                content=r.text().replace("recieve", "receive"),
            )
        ),
        call("git__git_add", repo_path=str(w.repo), files=["README.md"]),
        call("git__git_commit", repo_path=str(w.repo), message="Fix typo in README"),
        answer("fix/typo has the corrected README."),
    ],
)

# --- time zones -----------------------------------------------------------------------------------------

_CITIES = {"Tokyo": "Asia/Tokyo", "London": "Europe/London", "New York": "America/New_York"}


def _local_times() -> dict[str, str]:
    today = dt.datetime.now(ZoneInfo("Europe/Berlin")).date()
    start = dt.datetime.combine(today, dt.time(15, 0), ZoneInfo("Europe/Berlin"))
    return {
        city: start.astimezone(ZoneInfo(zone)).strftime("%H:%M") for city, zone in _CITIES.items()
    }


def _check_times(world: World) -> str | None:
    got = world.file("meeting_times.md") or ""
    lines = got.splitlines()
    wrong = [
        c for c, t in _local_times().items() if not any(c in line and t in line for line in lines)
    ]
    return expect(bool(got) and not wrong, f"meeting_times.md lacks the time of {wrong}")


TIMES = Task(
    id="time_zones",
    prompt="A call is today at 15:00 Berlin time. Write meeting_times.md in the workspace "
    "({workspace}) with one line per city giving the local time (HH:MM) of the call in Tokyo, "
    "London and New York.",
    check=_check_times,
    codemode=lambda w: [
        search("convert a time between time zones"),
        execute(
            "from servers import time\n\nCITIES = {'Tokyo': 'Asia/Tokyo', 'London': 'Europe/London', 'New York': 'America/New_York'}\n"
            "def local(zone):\n    t = time.convert_time(source_timezone='Europe/Berlin', time='15:00', target_timezone=zone)\n"
            "    return t['target']['datetime'][11:16]\n\n"
            "lines = [f'- {city}: {local(zone)}' for city, zone in CITIES.items()]\n"
            "open('meeting_times.md', 'w').write('\\n'.join(lines) + '\\n')\nprint(lines)",
            "Plan: convert 15:00 Berlin to each zone with the time tool.",
        ),
        answer("meeting_times.md has the three local times."),
    ],
    baseline=lambda w: [
        calls(
            [
                (
                    "time__convert_time",
                    {"source_timezone": "Europe/Berlin", "time": "15:00", "target_timezone": z},
                )
                for z in _CITIES.values()
            ]
        ),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.workspace / "meeting_times.md"),
                content="".join(
                    f"- {city}: {json.loads(text)['target']['datetime'][11:16]}\n"
                    for city, text in zip(_CITIES, r.texts[-3:], strict=True)
                ),
            )
        ),
        answer("meeting_times.md has the three local times."),
    ],
)

# --- the warehouse: a tool that fails once, purchase orders ----------------------------------------------


def _eur_pipeline(leads: list[dict[str, Any]], rate: float) -> dict[str, float]:
    totals: dict[str, int] = Counter()
    for r in leads:
        if r["stage"] not in ("Closed Won", "Closed Lost"):
            totals[r["country"]] += r["deal_value"]
    return {c: round(v * rate, 2) for c, v in sorted(totals.items())}


def _check_eur(world: World) -> str | None:
    got = world.file("eur_pipeline.json")
    leads = [dict(r) for r in world.rows("crm", "SELECT country, stage, deal_value FROM leads")]
    wanted = _eur_pipeline(leads, 0.92)
    try:
        data = json.loads(got) if got else {}
    except ValueError:
        data = {}
    wrong = [c for c, v in wanted.items() if abs(float(data.get(c, -1)) - v) > 0.01]
    return expect(not wrong and set(data) == set(wanted), f"wrong EUR totals for {wrong[:4]}")


EUR = Task(
    id="flaky_rates_tool",
    prompt="Convert the open pipeline (deal values of leads in any stage but Closed Won and "
    "Closed Lost) per country from USD to EUR with today's rate from the warehouse's "
    "exchange-rate tool, and save {{country: amount}} (2 decimals) to eur_pipeline.json in the "
    "workspace ({workspace}).",
    check=_check_eur,
    codemode=lambda w: [
        search("exchange rates"),
        execute(
            "import json\nfrom collections import Counter\nfrom servers import crm, ops\n\n"
            "rate = ops.get_exchange_rates()['rates']['EUR']\nprint(rate)",
            "Plan: get the EUR rate, total open deals per country, convert, save.",
        ),
        execute(
            "def pipeline():\n    totals = Counter()\n    for r in crm.search_leads(limit=500)['leads']:\n"
            "        if r['stage'] not in ('Closed Won', 'Closed Lost'):\n            totals[r['country']] += r['deal_value']\n"
            "    return totals\n\nrate = ops.get_exchange_rates()['rates']['EUR']\n"
            "eur = {c: round(v * rate, 2) for c, v in sorted(pipeline().items())}\n"
            "json.dump(eur, open('eur_pipeline.json', 'w'))\nprint(rate, eur)",
            "The rates service was unavailable once: retry it, then do the rest.",
        ),
        answer("eur_pipeline.json has the open pipeline per country in EUR."),
    ],
    baseline=lambda w: [
        call("ops__get_exchange_rates"),
        call("ops__get_exchange_rates", "The service asked for a retry."),
        call("crm__search_leads", limit=500),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.workspace / "eur_pipeline.json"),
                content=json.dumps(_eur_pipeline(r.json()["leads"], r.json(-2)["rates"]["EUR"])),
            )
        ),
        answer("eur_pipeline.json has the open pipeline per country in EUR."),
    ],
    tags=("recovery",),
)


def _reorders(items: list[dict[str, Any]]) -> dict[str, int]:
    return {
        i["sku"]: 2 * i["reorder_level"] - i["on_hand"]
        for i in items
        if i["on_hand"] < i["reorder_level"]
    }


def _check_reorder(world: World) -> str | None:
    state = world.ops_state()
    got = Counter()
    for order in state.get("orders", []):
        got[order["sku"]] += order["quantity"]
    wanted = _reorders(state.get("inventory", []))
    return expect(dict(got) == wanted, f"orders {dict(got)} != {wanted}")


REORDER = Task(
    id="warehouse_reorder",
    prompt="For every warehouse item whose stock (on_hand) is below its reorder level, create "
    "one purchase order for (2 x reorder_level - on_hand) units.",
    check=_check_reorder,
    codemode=lambda w: [
        search("warehouse inventory and purchase orders"),
        execute(
            "from servers import ops\n\nlow = [i for i in ops.list_inventory()['items'] if i['on_hand'] < i['reorder_level']]\n"
            "for i in low:\n    print(ops.create_purchase_order(sku=i['sku'], quantity=2 * i['reorder_level'] - i['on_hand']))",
            "Plan: find low items, one order each.",
        ),
        answer("Purchase orders created for the low items."),
    ],
    baseline=lambda w: [
        call("ops__list_inventory"),
        then(
            lambda r: calls(
                [
                    ("ops__create_purchase_order", {"sku": s, "quantity": q})
                    for s, q in _reorders(r.json()["items"]).items()
                ]
            )
        ),
        answer("Purchase orders created for the low items."),
    ],
)


TASKS = [MEMORY_REPS, MEMORY_COMPANIES, CHANGELOG, TYPO, TIMES, EUR, REORDER]
__all__ = ["TASKS", "Results", "_reorders"]

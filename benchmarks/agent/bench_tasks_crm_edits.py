"""Tasks that change many CRM records, and one that needs recovery from a wrong guess of a
field name."""

from __future__ import annotations

from typing import Any

from bench_refs import Results, answer, call, calls, execute, search, then
from bench_task import Task, expect, first_problem
from bench_world import World

OPEN = "stage NOT IN ('Closed Won', 'Closed Lost')"


def _leads(r: Results, index: int = -1) -> list[dict[str, Any]]:
    return list(r.json(index)["leads"])


# --- changing many records ------------------------------------------------------------------------

_CUTOFF = "2026-06-01"


def _snapshot(key: str, sql: str) -> Any:
    def setup(world: World) -> None:
        world.expected[key] = [r["id"] for r in world.rows("crm", sql)]

    return setup


def _check_stale(world: World) -> str | None:
    ids = world.expected["stale"]
    stages = {r["id"]: r["stage"] for r in world.rows("crm", "SELECT id, stage FROM leads")}
    wrong = [i for i in ids if stages.get(i) != "Closed Lost"]
    return first_problem(
        expect(bool(ids), "the setup found no stale negotiations"),
        expect(not wrong, f"still not Closed Lost: {wrong[:5]}"),
    )


STALE = Task(
    id="close_stale_negotiations",
    prompt=f"Every CRM lead in stage Negotiation whose last contact is before {_CUTOFF}: set its "
    "stage to Closed Lost.",
    setup=_snapshot(
        "stale", f"SELECT id FROM leads WHERE stage = 'Negotiation' AND last_contact < '{_CUTOFF}'"
    ),
    check=_check_stale,
    codemode=lambda w: [
        search("change the stage of a CRM lead"),
        execute(
            "from servers import crm\n\ndef stale(cutoff):\n"
            "    rows = crm.search_leads(stage='Negotiation', limit=500)['leads']\n"
            f"    return [r for r in rows if r['last_contact'] < cutoff]\n\n"
            f"ids = [r['id'] for r in stale('{_CUTOFF}')]\nfor lead_id in ids:\n"
            "    crm.update_lead(lead_id=lead_id, fields={'stage': 'Closed Lost'})\nprint(len(ids), 'closed:', ids)",
            "Plan: list Negotiation leads, keep the stale ones, update each.",
        ),
        answer("The stale negotiations are Closed Lost."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", stage="Negotiation", limit=500),
        then(
            lambda r: calls(
                [
                    ("crm__update_lead", {"lead_id": x["id"], "fields": {"stage": "Closed Lost"}})
                    for x in _leads(r)
                    if x["last_contact"] < _CUTOFF
                ]
            )
        ),
        answer("The stale negotiations are Closed Lost."),
    ],
)

_FOLLOW_UP = "Follow-up call booked for next week."


def _check_followups(world: World) -> str | None:
    ids = set(world.expected["followups"])
    noted = {
        r["id"]
        for r in world.rows("crm", "SELECT id, notes FROM leads")
        if r["notes"].endswith(_FOLLOW_UP)
    }
    return first_problem(
        expect(bool(ids), "the setup found no leads"),
        expect(noted == ids, f"noted {len(noted)} leads, expected {len(ids)}"),
    )


FOLLOWUPS = Task(
    id="append_followup_notes",
    prompt=f"For every CRM lead owned by Mei Tanaka in stage Proposal, add the note "
    f"'{_FOLLOW_UP}' (keep the existing notes).",
    setup=_snapshot(
        "followups", "SELECT id FROM leads WHERE owner = 'Mei Tanaka' AND stage = 'Proposal'"
    ),
    check=_check_followups,
    codemode=lambda w: [
        search("add a note to a CRM lead"),
        execute(
            "from servers import crm\n\nrows = crm.search_leads(query='Mei Tanaka', stage='Proposal', limit=500)['leads']\n"
            "mine = [r for r in rows if r['owner'] == 'Mei Tanaka']\nfor r in mine:\n"
            f"    crm.append_note(lead_id=r['id'], note={_FOLLOW_UP!r})\nprint(len(mine), 'notes added')",
            "Plan: search her Proposal leads, keep exact owner matches, append the note.",
        ),
        answer("Follow-up notes added."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", query="Mei Tanaka", stage="Proposal", limit=500),
        then(
            lambda r: calls(
                [
                    ("crm__append_note", {"lead_id": x["id"], "note": _FOLLOW_UP})
                    for x in _leads(r)
                    if x["owner"] == "Mei Tanaka"
                ]
            )
        ),
        answer("Follow-up notes added."),
    ],
)


def _check_deleted(world: World) -> str | None:
    ids = world.expected["small_lost"]
    left = {r["id"] for r in world.rows("crm", "SELECT id FROM leads")}
    return first_problem(
        expect(bool(ids), "the setup found nothing to delete"),
        expect(not (set(ids) & left), f"not deleted: {sorted(set(ids) & left)[:5]}"),
        expect(
            len(left) == world.expected["leads_before_delete"] - len(ids),
            "other leads were deleted",
        ),
    )


def _setup_delete(world: World) -> None:
    _snapshot(
        "small_lost", "SELECT id FROM leads WHERE stage = 'Closed Lost' AND deal_value < 20000"
    )(world)
    world.expected["leads_before_delete"] = len(world.rows("crm", "SELECT id FROM leads"))


DELETE = Task(
    id="delete_small_lost_leads",
    prompt="Delete every CRM lead in stage Closed Lost with a deal value under $20,000.",
    setup=_setup_delete,
    check=_check_deleted,
    codemode=lambda w: [
        search("delete a CRM lead"),
        execute(
            "from servers import crm\n\nrows = crm.search_leads(stage='Closed Lost', limit=500)['leads']\n"
            "small = [r['id'] for r in rows if r['deal_value'] < 20_000]\nfor lead_id in small:\n"
            "    crm.delete_lead(lead_id=lead_id)\nprint('deleted', small)",
            "Plan: list Closed Lost leads, keep the small ones, delete each.",
        ),
        answer("The small Closed Lost leads are deleted."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", stage="Closed Lost", limit=500),
        then(
            lambda r: calls(
                [
                    ("crm__delete_lead", {"lead_id": x["id"]})
                    for x in _leads(r)
                    if x["deal_value"] < 20_000
                ]
            )
        ),
        answer("The small Closed Lost leads are deleted."),
    ],
)

# --- recovery: a wrong first guess of a field name ------------------------------------------------


def _negotiation_csv(leads: list[dict[str, Any]]) -> str:
    rows = sorted(
        (r for r in leads if r["stage"] == "Negotiation" and r["deal_value"] >= 200_000),
        key=lambda r: r["id"],
    )
    return (
        "\n".join(
            [
                "id,company,deal_value",
                *(f"{r['id']},{r['company']},{r['deal_value']}" for r in rows),
            ]
        )
        + "\n"
    )


def _check_negotiation(world: World) -> str | None:
    import csv
    import io

    got = world.file("negotiation_200k.csv")
    leads = [dict(r) for r in world.rows("crm", "SELECT id, company, stage, deal_value FROM leads")]
    wanted = [r["id"] for r in csv.DictReader(io.StringIO(_negotiation_csv(leads)))]
    ids = [r.get("id") for r in csv.DictReader(io.StringIO(got))] if got else None
    return expect(ids == wanted, f"negotiation_200k.csv has {ids}, expected {wanted}")


FIELD_GUESS = Task(
    id="wrong_field_name",
    prompt="Save negotiation_200k.csv in the workspace ({workspace}) with id, company and deal "
    "value of every CRM lead in stage Negotiation worth at least $200,000, sorted by id.",
    check=_check_negotiation,
    codemode=lambda w: [
        search("find CRM leads by stage"),
        execute(
            "import csv\nfrom servers import crm\n\nrows = crm.search_leads(stage='Negotiation', limit=500)['leads']\n"
            "big = sorted((r for r in rows if r['value'] >= 200_000), key=lambda r: r['id'])\nprint(len(big))",
            "Plan: Negotiation leads, keep value >= 200k, write CSV.",
        ),
        execute(
            "def write(path, leads):\n    with open(path, 'w', newline='') as f:\n"
            "        w = csv.writer(f, lineterminator='\\n')\n        w.writerow(['id', 'company', 'deal_value'])\n"
            "        w.writerows((r['id'], r['company'], r['deal_value']) for r in leads)\n\n"
            "big = sorted((r for r in rows if r['deal_value'] >= 200_000), key=lambda r: r['id'])\n"
            "write('negotiation_200k.csv', big)\nprint(len(big), 'leads written')",
            "The error says the field is deal_value.",
        ),
        answer("negotiation_200k.csv has the big Negotiation leads."),
    ],
    baseline=lambda w: [
        # A wrong guess: min_deal_value is not a parameter; the server ignores it.
        call("crm__search_leads", stage="Negotiation", min_deal_value=200_000, limit=500),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.workspace / "negotiation_200k.csv"),
                content=_negotiation_csv(_leads(r)),
                thoughts="The filter was ignored; keep the leads worth $200,000 or more.",
            )
        ),
        answer("negotiation_200k.csv has the big Negotiation leads."),
    ],
    tags=("recovery",),
)


TASKS = [FOLLOWUPS, FIELD_GUESS, STALE, DELETE]
__all__ = ["TASKS", "Results"]

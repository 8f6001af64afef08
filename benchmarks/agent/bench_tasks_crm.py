"""Tasks over the demo servers: documents, the CRM (300 leads) and the mailing tool."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from bench_refs import Results, answer, call, calls, execute, search, then
from bench_task import Task, expect
from bench_world import World

from codemode.demo import ACME_LEAD_ID, MEETING_DOCUMENT_ID

OPEN = "stage NOT IN ('Closed Won', 'Closed Lost')"


def _leads(r: Results, index: int = -1) -> list[dict[str, Any]]:
    return list(r.json(index)["leads"])


# --- the transcript -> CRM note (the seeds' case) -------------------------------------------------

TRANSCRIPT_CODE = """\
from servers import docs, crm

def transcript():
    hits = docs.search_documents(query="Q3 review meeting transcript")["hits"]
    return docs.get_document(document_id=hits[0]["id"])

def acme_lead():
    return crm.search_leads(query="Acme Corp")["leads"][0]

doc, lead = transcript(), acme_lead()
crm.update_lead(lead_id=lead["id"], fields={"notes": doc["content"]})
check = crm.get_lead(lead_id=lead["id"])
print(doc["id"], "->", lead["id"], len(doc["content"]), "chars copied:", check["notes"] == doc["content"])
"""


def _check_transcript(world: World) -> str | None:
    (doc,) = world.rows(
        "docs", "SELECT content FROM documents WHERE id = ?", (MEETING_DOCUMENT_ID,)
    )
    (lead,) = world.rows("crm", "SELECT notes FROM leads WHERE id = ?", (ACME_LEAD_ID,))
    return expect(lead["notes"] == doc["content"], "Acme's notes are not the transcript")


TRANSCRIPT = Task(
    id="transcript_to_crm",
    prompt="Copy the full transcript of the Q3 quarterly business review meeting into the notes "
    "of the Acme Corp lead in the CRM.",
    check=_check_transcript,
    codemode=lambda w: [
        search("read a meeting transcript document", "Find how to read documents."),
        search("update the notes of a CRM lead"),
        execute(TRANSCRIPT_CODE, "Plan: find the transcript, find Acme's lead, copy, verify."),
        answer("The Q3 review transcript is now Acme Corp's notes."),
    ],
    baseline=lambda w: [
        call("docs__search_documents", query="Q3 review meeting transcript"),
        then(lambda r: call("docs__get_document", document_id=r.json()["hits"][0]["id"])),
        call("crm__search_leads", query="Acme Corp"),
        then(
            lambda r: call(
                "crm__update_lead",
                lead_id=_leads(r)[0]["id"],
                fields={"notes": r.json(-2)["content"]},
            )
        ),
        answer("The Q3 review transcript is now Acme Corp's notes."),
    ],
    tags=("seed",),
)

# --- filtering 300 leads (the seeds' case) --------------------------------------------------------


def _top_deals(leads: list[dict[str, Any]]) -> list[str]:
    hot = [
        r for r in leads if r["stage"] in ("Negotiation", "Proposal") and r["deal_value"] >= 150_000
    ]
    return [r["id"] for r in sorted(hot, key=lambda r: (-r["deal_value"], r["id"]))[:5]]


def _check_top(world: World) -> str | None:
    got = world.file("top_deals.json")
    leads = [dict(r) for r in world.rows("crm", "SELECT id, stage, deal_value FROM leads")]
    wanted = _top_deals(leads)
    try:
        ids = json.loads(got) if got else None
    except ValueError:
        ids = None
    if isinstance(ids, list) and ids and isinstance(ids[0], dict):
        ids = [item.get("id") for item in ids]
    return expect(ids == wanted, f"top_deals.json is {ids}, expected {wanted}")


TOP_DEALS = Task(
    id="filter_300_leads",
    prompt="Among all CRM leads, find the five biggest deals in stage Negotiation or Proposal "
    "worth at least $150,000, and save their lead ids, biggest first, as a JSON list in "
    "top_deals.json in the workspace ({workspace}).",
    check=_check_top,
    codemode=lambda w: [
        search("list CRM leads with their stage and deal value"),
        execute(
            "import json\nfrom servers import crm\n\ndef top(rows, n=5):\n"
            "    hot = [r for r in rows if r['stage'] in ('Negotiation', 'Proposal') and r['deal_value'] >= 150_000]\n"
            "    return sorted(hot, key=lambda r: (-r['deal_value'], r['id']))[:n]\n\n"
            "rows = crm.search_leads(limit=500)['leads']\nbest = top(rows)\n"
            "json.dump([r['id'] for r in best], open('top_deals.json', 'w'))\n"
            "print(len(rows), 'leads;', [(r['id'], r['deal_value']) for r in best])",
            "Plan: fetch all leads in the sandbox, filter and sort there, save five ids.",
        ),
        answer("top_deals.json has the five biggest late-stage deals."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", limit=500),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.workspace / "top_deals.json"),
                content=json.dumps(_top_deals(_leads(r))),
            )
        ),
        answer("top_deals.json has the five biggest late-stage deals."),
    ],
    tags=("seed",),
)

# --- CRM contacts -> a mailing list --------------------------------------------------------------


def _check_webinar(world: World) -> str | None:
    subscribers = {
        r["email"].lower()
        for r in world.rows(
            "mail", "SELECT email FROM subscribers WHERE list_name = 'retail-webinar'"
        )
    }
    wanted = {
        r["email"].lower()
        for r in world.rows("crm", "SELECT email FROM leads WHERE industry = 'Retail'")
    }
    return expect(
        subscribers == wanted, f"{len(subscribers)} subscribers, {len(wanted)} retail contacts"
    )


WEBINAR = Task(
    id="crm_to_mailing_list",
    prompt="Add the contact person of every Retail lead in the CRM to the mailing list "
    "'retail-webinar', with their name.",
    check=_check_webinar,
    codemode=lambda w: [
        search("add a subscriber to a mailing list"),
        execute(
            "from servers import crm, mail\n\ncontacts = crm.list_contacts(industry='Retail', limit=200)['contacts']\n"
            "for c in contacts:\n    mail.add_subscriber(list_name='retail-webinar', email=c['email'], name=c['name'])\n"
            "print(len(contacts), 'added;', mail.list_subscribers(list_name='retail-webinar')['count'], 'on the list')",
            "Plan: list Retail contacts, add each to the list, count.",
        ),
        answer("All Retail contacts are on retail-webinar."),
    ],
    baseline=lambda w: [
        call("crm__list_contacts", industry="Retail", limit=200),
        then(
            lambda r: calls(
                [
                    (
                        "mail__add_subscriber",
                        {"list_name": "retail-webinar", "email": c["email"], "name": c["name"]},
                    )
                    for c in r.json()["contacts"]
                ]
            )
        ),
        answer("All Retail contacts are on retail-webinar."),
    ],
)

# --- reports ----------------------------------------------------------------------------------------


def _pipeline_by_owner(leads: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for r in leads:
        if r["stage"] not in ("Closed Won", "Closed Lost"):
            totals[r["owner"]] += r["deal_value"]
    return dict(sorted(totals.items()))


def _pipeline_body(leads: list[dict[str, Any]]) -> str:
    return "\n".join(f"{o}: ${v:,}" for o, v in _pipeline_by_owner(leads).items())


def _check_pipeline(world: World) -> str | None:
    rows = world.rows(
        "mail",
        "SELECT body FROM outbox WHERE to_addr = 'sales-lead@example.com' "
        "AND subject = 'Open pipeline by owner'",
    )
    leads = [dict(r) for r in world.rows("crm", "SELECT owner, stage, deal_value FROM leads")]
    if len(rows) != 1:
        return f"{len(rows)} pipeline emails, expected 1"
    body = rows[0]["body"]
    missing = [
        o for o, v in _pipeline_by_owner(leads).items() if o not in body or f"{v:,}" not in body
    ]
    return expect(not missing, f"the email lacks the totals of {missing}")


PIPELINE = Task(
    id="pipeline_email",
    prompt="Email sales-lead@example.com with the subject 'Open pipeline by owner' and a body "
    "listing, for each lead owner, the total deal value of their open leads (every stage but "
    "Closed Won and Closed Lost), as dollars with thousands separators.",
    check=_check_pipeline,
    codemode=lambda w: [
        search("send an email"),
        execute(
            "from collections import defaultdict\nfrom servers import crm, mail\n\ndef pipeline():\n"
            "    totals = defaultdict(int)\n    for r in crm.search_leads(limit=500)['leads']:\n"
            "        if r['stage'] not in ('Closed Won', 'Closed Lost'):\n            totals[r['owner']] += r['deal_value']\n"
            "    return dict(sorted(totals.items()))\n\nbody = '\\n'.join(f'{o}: ${v:,}' for o, v in pipeline().items())\n"
            "mail.send_email(to='sales-lead@example.com', subject='Open pipeline by owner', body=body)\nprint(body)",
            "Plan: total open deals per owner in the sandbox, send one email.",
        ),
        answer("Sent the open pipeline by owner."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", limit=500),
        then(
            lambda r: call(
                "mail__send_email",
                to="sales-lead@example.com",
                subject="Open pipeline by owner",
                body=_pipeline_body(_leads(r)),
            )
        ),
        answer("Sent the open pipeline by owner."),
    ],
)


def _germany_content(leads: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{r['id']} {r['company']}: ${r['deal_value']:,}"
        for r in leads
        if r["country"] == "Germany"
    )


def _check_germany(world: World) -> str | None:
    docs = world.rows(
        "docs",
        "SELECT content FROM documents WHERE title = 'Germany pipeline' AND folder = '/Reports'",
    )
    ids = [r["id"] for r in world.rows("crm", "SELECT id FROM leads WHERE country = 'Germany'")]
    if len(docs) != 1:
        return f"{len(docs)} 'Germany pipeline' documents in /Reports, expected 1"
    missing = [i for i in ids if i not in docs[0]["content"]]
    return expect(not missing, f"the document lacks {missing[:5]}")


GERMANY = Task(
    id="germany_pipeline_doc",
    prompt="Create a document titled 'Germany pipeline' in the /Reports folder listing every CRM "
    "lead in Germany: its id, company and deal value.",
    check=_check_germany,
    codemode=lambda w: [
        search("create a document"),
        execute(
            "from servers import crm, docs\n\nrows = crm.search_leads(country='Germany', limit=500)['leads']\n"
            "content = '\\n'.join(f\"{r['id']} {r['company']}: ${r['deal_value']:,}\" for r in rows)\n"
            "info = docs.create_document(title='Germany pipeline', content=content, folder='/Reports')\n"
            "print(len(rows), 'leads ->', info['id'])",
            "Plan: German leads, one line each, one new document.",
        ),
        answer("Created 'Germany pipeline' in /Reports."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", country="Germany", limit=500),
        then(
            lambda r: call(
                "docs__create_document",
                title="Germany pipeline",
                folder="/Reports",
                content=_germany_content(_leads(r)),
            )
        ),
        answer("Created 'Germany pipeline' in /Reports."),
    ],
)


def _proposal_lead(doc_id: str) -> str:
    return "LEAD-" + doc_id.split("_lead_")[1].split("_", maxsplit=1)[0]


def _check_proposals(world: World) -> str | None:
    docs = world.rows("docs", "SELECT id FROM documents WHERE folder = '/Sales/Proposals'")
    notes = {r["id"]: r["notes"] for r in world.rows("crm", "SELECT id, notes FROM leads")}
    wrong = [
        d["id"]
        for d in docs
        if not notes.get(_proposal_lead(d["id"]), "").endswith(f"Proposal on file: {d['id']}")
    ]
    return expect(not wrong, f"no note for {wrong}")


PROPOSALS = Task(
    id="proposals_on_file",
    prompt="For every proposal document in the /Sales/Proposals folder, add a note "
    "'Proposal on file: DOCUMENT_ID' to the CRM lead it is for (the lead number is in the "
    "document id, e.g. doc_proposal_lead_0137_v3 is for LEAD-0137).",
    check=_check_proposals,
    codemode=lambda w: [
        search("list documents in a folder"),
        execute(
            "from servers import docs, crm\n\ndef lead_of(doc_id):\n"
            "    return 'LEAD-' + doc_id.split('_lead_')[1].split('_')[0]\n\n"
            "found = docs.list_documents(folder='/Sales/Proposals')['documents']\nfor d in found:\n"
            "    crm.append_note(lead_id=lead_of(d['id']), note=f\"Proposal on file: {d['id']}\")\n"
            "print([(d['id'], lead_of(d['id'])) for d in found])",
            "Plan: list the proposals, map each to its lead, append the note.",
        ),
        answer("Every proposal is noted on its lead."),
    ],
    baseline=lambda w: [
        call("docs__list_documents", folder="/Sales/Proposals"),
        then(
            lambda r: calls(
                [
                    (
                        "crm__append_note",
                        {
                            "lead_id": _proposal_lead(d["id"]),
                            "note": f"Proposal on file: {d['id']}",
                        },
                    )
                    for d in r.json()["documents"]
                ]
            )
        ),
        answer("Every proposal is noted on its lead."),
    ],
)


def _check_industries(world: World) -> str | None:
    got = world.file("industry_counts.json")
    wanted = dict(Counter(r["industry"] for r in world.rows("crm", "SELECT industry FROM leads")))
    try:
        data = json.loads(got) if got else None
    except ValueError:
        data = None
    return expect(data == wanted, f"industry_counts.json is {data}, expected {wanted}")


INDUSTRIES = Task(
    id="industry_counts",
    prompt="Count the CRM leads per industry and save the counts as a JSON object in "
    "industry_counts.json in the workspace ({workspace}).",
    check=_check_industries,
    codemode=lambda w: [
        search("list CRM leads"),
        execute(
            "import json\nfrom collections import Counter\nfrom servers import crm\n\n"
            "counts = Counter(r['industry'] for r in crm.search_leads(limit=500)['leads'])\n"
            "json.dump(counts, open('industry_counts.json', 'w'))\nprint(counts)",
            "Plan: count industries over all leads in the sandbox.",
        ),
        answer("industry_counts.json has the counts."),
    ],
    baseline=lambda w: [
        call("crm__search_leads", limit=500),
        then(
            lambda r: call(
                "filesystem__write_file",
                path=str(w.workspace / "industry_counts.json"),
                content=json.dumps(dict(Counter(x["industry"] for x in _leads(r)))),
            )
        ),
        answer("industry_counts.json has the counts."),
    ],
)


def _check_newsletter(world: World) -> str | None:
    (doc,) = world.rows(
        "docs",
        "SELECT title, content FROM documents WHERE folder = '/Product/Releases' "
        "ORDER BY created DESC LIMIT 1",
    )
    sent = {
        r["to_addr"].lower()
        for r in world.rows("mail", "SELECT to_addr FROM outbox WHERE subject = ?", (doc["title"],))
    }
    wanted = {
        r["email"].lower()
        for r in world.rows("mail", "SELECT email FROM subscribers WHERE list_name = 'newsletter'")
    }
    return expect(sent == wanted, f"sent to {len(sent)} of {len(wanted)} newsletter subscribers")


NEWSLETTER = Task(
    id="release_newsletter",
    prompt="Send the latest release notes document (folder /Product/Releases) to every "
    "subscriber of the 'newsletter' mailing list: the document's title as subject, its content "
    "as body.",
    check=_check_newsletter,
    codemode=lambda w: [
        search("send an email to the subscribers of a mailing list"),
        execute(
            "from servers import docs, mail\n\nlatest = docs.list_documents(folder='/Product/Releases', limit=1)['documents'][0]\n"
            "doc = docs.get_document(document_id=latest['id'])\n"
            "people = mail.list_subscribers(list_name='newsletter')['subscribers']\nfor p in people:\n"
            "    mail.send_email(to=p['email'], subject=doc['title'], body=doc['content'])\n"
            "print(doc['title'], '->', len(people), 'subscribers')",
            "Plan: newest release notes, then one email per subscriber.",
        ),
        answer("Sent the latest release notes to the newsletter list."),
    ],
    baseline=lambda w: [
        call("docs__list_documents", folder="/Product/Releases", limit=1),
        then(lambda r: call("docs__get_document", document_id=r.json()["documents"][0]["id"])),
        call("mail__list_subscribers", list_name="newsletter"),
        then(
            lambda r: calls(
                [
                    (
                        "mail__send_email",
                        {
                            "to": p["email"],
                            "subject": r.json(-2)["title"],
                            "body": r.json(-2)["content"],
                        },
                    )
                    for p in r.json()["subscribers"]
                ]
            )
        ),
        answer("Sent the latest release notes to the newsletter list."),
    ],
)


TASKS = [TRANSCRIPT, TOP_DEALS, WEBINAR, PIPELINE, GERMANY, PROPOSALS, INDUSTRIES, NEWSLETTER]
__all__ = ["TASKS", "Results"]

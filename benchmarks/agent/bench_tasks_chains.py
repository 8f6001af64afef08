"""Chains across servers: documents, CRM and mail; documents and the knowledge graph; the
warehouse, documents and mail; the time server and the CRM."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any
from zoneinfo import ZoneInfo

from bench_refs import Results, answer, call, calls, execute, search, then
from bench_task import Task, expect, first_problem
from bench_tasks_servers import _reorders
from bench_world import World

# --- chains across servers ------------------------------------------------------------------------------

_THANKS = "Thank you for the Q3 review"


def _check_thanks(world: World) -> str | None:
    (lead,) = world.rows("crm", "SELECT email FROM leads WHERE id = 'LEAD-0137'")
    (doc,) = world.rows(
        "docs", "SELECT title FROM documents WHERE id = 'doc_meeting_2026_q3_review'"
    )
    rows = world.rows(
        "mail",
        "SELECT body FROM outbox WHERE subject = ? AND lower(to_addr) = lower(?)",
        (_THANKS, lead["email"]),
    )
    return first_problem(
        expect(len(rows) == 1, f"{len(rows)} thank-you emails to Acme's contact"),
        expect(
            bool(rows) and doc["title"] in rows[0]["body"], "the body lacks the meeting's title"
        ),
    )


THANKS = Task(
    id="chain_docs_crm_mail",
    prompt=f"Email the contact person of the Acme Corp lead (from the CRM) with the subject "
    f"'{_THANKS}' and a short body that names the title of the Q3 quarterly business review "
    "meeting document.",
    check=_check_thanks,
    codemode=lambda w: [
        search("find a document; find a CRM lead; send an email"),
        execute(
            "from servers import docs, crm, mail\n\n"
            "doc = docs.search_documents(query='Q3 quarterly business review meeting', limit=1)['hits'][0]\n"
            "lead = crm.search_leads(query='Acme Corp', limit=1)['leads'][0]\n"
            f"mail.send_email(to=lead['email'], subject={_THANKS!r}, "
            "body=f\"Dear {lead['contact_name']},\\n\\nthank you for joining '{doc['title']}'.\")\nprint('sent to', lead['id'])",
            "Plan: the document's title, Acme's contact, one email.",
        ),
        answer("Sent the thank-you email to Acme's contact."),
    ],
    baseline=lambda w: [
        calls(
            [
                (
                    "docs__search_documents",
                    {"query": "Q3 quarterly business review meeting", "limit": 1},
                ),
                ("crm__search_leads", {"query": "Acme Corp", "limit": 1}),
            ]
        ),
        then(
            lambda r: call(
                "mail__send_email",
                to=r.json()["leads"][0]["email"],
                subject=_THANKS,
                body=f"Dear {r.json()['leads'][0]['contact_name']},\n\nthank you for joining "
                f"'{r.json(-2)['hits'][0]['title']}'.",
            )
        ),
        answer("Sent the thank-you email to Acme's contact."),
    ],
)


def _edge_count(world: World) -> int:
    return len(
        world.rows(
            "docs",
            "SELECT id FROM documents WHERE folder LIKE '/Meetings%' "
            "AND (content LIKE '%Beacon Edge%' OR title LIKE '%Beacon Edge%')",
        )
    )


def _check_edge(world: World) -> str | None:
    entities, _ = world.memory_graph()
    edge = [
        e for e in entities if e.get("name") == "Beacon Edge" and e.get("entityType") == "product"
    ]
    wanted = f"mentioned in {_edge_count(world)} meeting documents"
    return expect(
        bool(edge) and wanted in edge[0].get("observations", []),
        f"no product entity with '{wanted}'",
    )


EDGE = Task(
    id="chain_docs_memory",
    prompt="Count the documents under /Meetings that mention 'Beacon Edge', and record it in the "
    "knowledge graph as an entity 'Beacon Edge' of type product with the observation "
    "'mentioned in N meeting documents'.",
    check=_check_edge,
    codemode=lambda w: [
        search("list documents in a folder; create an entity in the knowledge graph"),
        execute(
            "from servers import docs, memory\n\ndef mentions(phrase):\n"
            "    listed = docs.list_documents(folder='/Meetings', limit=500)['documents']\n"
            "    found = [d for d in listed if phrase in d['title'] or phrase in docs.get_document(document_id=d['id'])['content']]\n"
            "    return len(found)\n\nn = mentions('Beacon Edge')\n"
            "memory.create_entities(entities=[{'name': 'Beacon Edge', 'entityType': 'product', "
            "'observations': [f'mentioned in {n} meeting documents']}])\nprint(n)",
            "Plan: read every meeting document in the sandbox, count, record.",
        ),
        answer("Recorded Beacon Edge's meeting mentions in the graph."),
    ],
    baseline=lambda w: [
        call("docs__list_documents", folder="/Meetings", limit=500),
        then(
            lambda r: calls(
                [("docs__get_document", {"document_id": d["id"]}) for d in r.json()["documents"]]
            )
        ),
        then(
            lambda r: call(
                "memory__create_entities",
                entities=[
                    {
                        "name": "Beacon Edge",
                        "entityType": "product",
                        "observations": [
                            f"mentioned in {sum('Beacon Edge' in json.loads(t)['content'] or 'Beacon Edge' in json.loads(t)['title'] for t in r.texts[1:])} meeting documents"
                        ],
                    }
                ],
            )
        ),
        answer("Recorded Beacon Edge's meeting mentions in the graph."),
    ],
)


def _low_lines(items: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{i['sku']} {i['name']}: {i['on_hand']} on hand, reorder at {i['reorder_level']}"
        for i in items
        if i["on_hand"] < i["reorder_level"]
    )


def _check_low_doc(world: World) -> str | None:
    docs = world.rows(
        "docs",
        "SELECT id, content FROM documents WHERE title = 'Low stock' AND folder = '/Reports'",
    )
    low = list(_reorders(world.ops_state()["inventory"]))
    mails = world.rows("mail", "SELECT body FROM outbox WHERE to_addr = 'purchasing@example.com'")
    if len(docs) != 1:
        return f"{len(docs)} 'Low stock' documents in /Reports"
    return first_problem(
        expect(all(s in docs[0]["content"] for s in low), "the document misses items"),
        expect(any(docs[0]["id"] in m["body"] for m in mails), "no email names the document id"),
    )


LOW_DOC = Task(
    id="chain_ops_docs_mail",
    prompt="Write a document 'Low stock' in /Reports listing every warehouse item below its "
    "reorder level, then email purchasing@example.com (subject 'Low stock report') with the "
    "new document's id in the body.",
    check=_check_low_doc,
    codemode=lambda w: [
        search("warehouse inventory; create a document; send an email"),
        execute(
            "from servers import ops, docs, mail\n\nlow = [i for i in ops.list_inventory()['items'] if i['on_hand'] < i['reorder_level']]\n"
            "content = '\\n'.join(f\"{i['sku']} {i['name']}: {i['on_hand']} on hand, reorder at {i['reorder_level']}\" for i in low)\n"
            "info = docs.create_document(title='Low stock', content=content, folder='/Reports')\n"
            "mail.send_email(to='purchasing@example.com', subject='Low stock report', body=f\"See document {info['id']}.\")\n"
            "print(info['id'], len(low))",
            "Plan: low items, one document, one email with its id.",
        ),
        answer("Low stock document written and purchasing emailed."),
    ],
    baseline=lambda w: [
        call("ops__list_inventory"),
        then(
            lambda r: call(
                "docs__create_document",
                title="Low stock",
                folder="/Reports",
                content=_low_lines(r.json()["items"]),
            )
        ),
        then(
            lambda r: call(
                "mail__send_email",
                to="purchasing@example.com",
                subject="Low stock report",
                body=f"See document {r.json()['id']}.",
            )
        ),
        answer("Low stock document written and purchasing emailed."),
    ],
)


def _check_call_note(world: World) -> str | None:
    (lead,) = world.rows("crm", "SELECT notes FROM leads WHERE id = 'LEAD-0042'")
    match = re.search(r"Called at (\d\d):(\d\d) Tokyo time\.?$", lead["notes"])
    if not match:
        return "LEAD-0042 has no 'Called at HH:MM Tokyo time' note at the end"
    now = dt.datetime.now(ZoneInfo("Asia/Tokyo"))
    minutes = abs((now.hour * 60 + now.minute) - (int(match[1]) * 60 + int(match[2]))) % (24 * 60)
    return expect(
        min(minutes, 24 * 60 - minutes) <= 15, "the note's time is not the current Tokyo time"
    )


CALL_NOTE = Task(
    id="chain_time_crm",
    prompt="Add the note 'Called at HH:MM Tokyo time' to CRM lead LEAD-0042, with the current "
    "time in Tokyo from the time tool.",
    check=_check_call_note,
    codemode=lambda w: [
        search("current time in a time zone; add a note to a CRM lead"),
        execute(
            "from servers import time, crm\n\nnow = time.get_current_time(timezone='Asia/Tokyo')['datetime'][11:16]\n"
            "print(crm.append_note(lead_id='LEAD-0042', note=f'Called at {now} Tokyo time'))",
            "Plan: Tokyo time, then one note.",
        ),
        answer("Noted the call on LEAD-0042."),
    ],
    baseline=lambda w: [
        call("time__get_current_time", timezone="Asia/Tokyo"),
        then(
            lambda r: call(
                "crm__append_note",
                lead_id="LEAD-0042",
                note=f"Called at {r.json()['datetime'][11:16]} Tokyo time",
            )
        ),
        answer("Noted the call on LEAD-0042."),
    ],
)


TASKS = [THANKS, EDGE, LOW_DOC, CALL_NOTE]
__all__ = ["TASKS", "Results"]

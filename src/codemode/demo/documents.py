"""The demo document store's contents: the QBR transcript among a few dozen ordinary documents."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass

from codemode.demo.leads import ACME_LEAD_ID, Lead
from codemode.demo.transcript import MEETING_DATE, MEETING_TITLE, meeting_transcript

__all__ = ["MEETING_DOCUMENT_ID", "Document", "generate_documents"]

MEETING_DOCUMENT_ID = "doc_meeting_2026_q3_review"


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    folder: str
    created: str
    content: str


_PRODUCTS = ("Beacon Core", "Beacon Insights", "Beacon Connect", "Beacon Edge")
_REPS = ("Sofia Lindqvist", "Ben Carter", "Mei Tanaka", "Jonas Becker", "Camille Dubois")

_POLICIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "Travel and expense policy": (
        "/HR/Policies",
        (
            "Book travel through the company portal at least 14 days ahead where possible.",
            "Economy class for flights under six hours; premium economy above that.",
            "Hotels up to 180 EUR per night in most cities, 250 EUR in London, Paris and New York.",
            "Submit receipts within 30 days; expenses older than 90 days are not reimbursed.",
            "Client dinners need a note with the attendees and the opportunity they relate to.",
        ),
    ),
    "Paid time off policy": (
        "/HR/Policies",
        (
            "Everyone has 28 days of paid leave per year plus local public holidays.",
            "Up to five unused days carry over into the first quarter of the next year.",
            "Tell your manager at least two weeks ahead for absences longer than three days.",
            "Sick leave is separate from paid leave and needs no doctor's note for three days.",
        ),
    ),
    "New hire onboarding checklist": (
        "/HR/Onboarding",
        (
            "Day one: laptop, accounts, security training and a coffee with your buddy.",
            "Week one: product walkthrough, shadow two customer calls, read the handbook.",
            "Month one: first small project shipped, 30-day check-in with your manager.",
            "Sales hires also complete the discovery call certification by day 45.",
        ),
    ),
    "Pricing and discount approval matrix": (
        "/Finance",
        (
            "Discounts up to 10% can be approved by the account executive.",
            "Discounts from 10% to 20% need the regional sales director.",
            "Anything above 20%, non-standard payment terms or liability caps above 1x annual "
            "fees need the CFO.",
            "Multi-year deals with price locks longer than two years need CEO sign-off.",
        ),
    ),
    "Discovery call guide": (
        "/Sales/Playbooks",
        (
            "Open with the customer's goals for the next twelve months, not with our product.",
            "Find out who feels the pain daily and who signs the contract.",
            "Quantify the current cost: picking errors, overtime, late shipments, manual reports.",
            "Agree a concrete next step with a date before you end the call.",
        ),
    ),
    "Objection handling: price": (
        "/Sales/Playbooks",
        (
            "Anchor on the measured value from the pilot rather than on list price.",
            "Trade discount for term length, case studies or faster signature, never for nothing.",
            "Competitors that are cheaper usually lack carrier integrations; show the gap live.",
        ),
    ),
    "Security overview for customers": (
        "/Product/Security",
        (
            "Data is encrypted in transit with TLS 1.3 and at rest with AES-256.",
            "Customer data is hosted in Frankfurt or Virginia at the customer's choice.",
            "We hold SOC 2 Type II and ISO 27001 certifications; reports are available under NDA.",
            "Single sign-on via SAML or OIDC, with SCIM provisioning on the Enterprise plan.",
        ),
    ),
}


def _paragraphs(rng: random.Random, sentences: Sequence[str], count: int) -> str:
    chosen = [
        rng.sample(list(sentences), min(len(sentences), rng.randint(2, 4))) for _ in range(count)
    ]
    return "\n\n".join(" ".join(p) for p in chosen)


def _sales_sync(rng: random.Random, day: dt.date, leads: Sequence[Lead]) -> str:
    lines = [
        f"Weekly sales sync, {day.isoformat()}",
        "",
        "Attendees: Marcus Oyelaran, " + ", ".join(_REPS),
    ]
    lines.append("")
    steps = ("demo", "proposal review", "security review", "pricing call")
    lines.extend(
        f"- {lead.company} ({lead.owner}): {lead.stage.lower()}, about ${lead.deal_value:,}. "
        f"Next step: {rng.choice(steps)} on "
        f"{(day + dt.timedelta(days=rng.randint(2, 12))).isoformat()}."
        for lead in rng.sample(list(leads), 5)
    )
    lines += ["", f"Forecast call moved to {rng.choice(('Monday', 'Tuesday', 'Thursday'))}."]
    return "\n".join(lines)


def _proposal(rng: random.Random, lead: Lead, version: int) -> str:
    sites = rng.randint(2, 14)
    return "\n".join(
        [
            f"Proposal v{version} for {lead.company}",
            f"Prepared by {lead.owner} for {lead.contact_name}, {lead.title}.",
            "",
            f"Scope: {rng.choice(_PRODUCTS)} for {sites} sites, with onboarding and training.",
            f"Annual subscription: ${lead.deal_value:,} before discounts.",
            f"Term: {rng.choice((1, 2, 3))} years, billed annually in advance, net 30.",
            "Implementation: six to ten weeks from signature, one dedicated solutions engineer.",
            "Support: business hours, 4-hour first response on priority tickets.",
        ]
    )


def _release_notes(rng: random.Random, version: str) -> str:
    items = (
        "Faster dashboard loading on large accounts.",
        "New carrier rate API endpoints.",
        "Anomaly alerts can be routed to Slack or Teams.",
        "Audit log export to CSV and S3.",
        "Offline mode for the scanner app (beta).",
        "SAP S/4HANA connector (early access).",
        "Role-based access for contractors.",
        "Dock scheduling calendar view.",
        "Bug fix: duplicate shipments in the weekly report.",
        "Bug fix: time zones in exports.",
    )
    chosen = rng.sample(items, 5)
    return f"Release notes, Beacon {version}\n\n" + "\n".join(f"- {item}" for item in chosen)


def generate_documents(seed: int, leads: Sequence[Lead]) -> list[Document]:
    """The demo documents for `seed`, sorted by id; `leads` feed the proposals and sync notes."""
    rng = random.Random(seed + 1)
    companies = [lead.company for lead in leads]
    docs = [
        Document(
            MEETING_DOCUMENT_ID,
            MEETING_TITLE,
            "/Meetings/2026",
            f"{MEETING_DATE}T12:05:00Z",
            meeting_transcript(seed, companies),
        ),
        Document(
            "doc_meeting_2026_q2_review_summary",
            "Q2 2026 Quarterly Business Review: Summary",
            "/Meetings/2026",
            "2026-07-07T15:30:00Z",
            "Summary of the Q2 review. Revenue 4% above plan; pipeline coverage 2.8x. "
            "Decisions: hire two solutions engineers, move the SAP connector to Q4, start the "
            "Acme Corp pilot in Rotterdam. The full recording was not transcribed.",
        ),
    ]
    for week in range(8):
        day = dt.date(2026, 8, 3) + dt.timedelta(weeks=week)
        docs.append(
            Document(
                f"doc_sales_sync_{day.isoformat().replace('-', '_')}",
                f"Weekly sales sync {day.isoformat()}",
                "/Meetings/Sales syncs",
                f"{day.isoformat()}T09:45:00Z",
                _sales_sync(rng, day, leads),
            )
        )
    by_id = {lead.id: lead for lead in leads}
    proposal_leads = [
        by_id[ACME_LEAD_ID],
        *rng.sample([x for x in leads if x.id != ACME_LEAD_ID], 7),
    ]
    for lead in proposal_leads:
        version = 3 if lead.id == ACME_LEAD_ID else rng.randint(1, 2)
        created = (
            dt.date(2026, 9, 22)
            if lead.id == ACME_LEAD_ID
            else dt.date(2026, 7, rng.randint(1, 31))
        )
        docs.append(
            Document(
                f"doc_proposal_{lead.id.lower().replace('-', '_')}_v{version}",
                f"{lead.company}: proposal v{version}",
                "/Sales/Proposals",
                f"{created.isoformat()}T16:00:00Z",
                _proposal(rng, lead, version),
            )
        )
    for title, (folder, sentences) in _POLICIES.items():
        slug = title.lower().replace(":", "").replace(" ", "_")
        docs.append(
            Document(
                f"doc_{slug}",
                title,
                folder,
                f"2026-0{rng.randint(1, 6)}-{rng.randint(10, 28)}T10:00:00Z",
                f"{title}\n\n" + _paragraphs(rng, sentences, 3),
            )
        )
    docs.extend(
        Document(
            f"doc_release_notes_4_{minor}",
            f"Release notes Beacon 4.{minor}",
            "/Product/Releases",
            f"2026-{2 + minor * 2:02d}-15T08:00:00Z",
            _release_notes(rng, f"4.{minor}"),
        )
        for minor in range(1, 5)
    )
    for quarter, focus in (("Q4 2026", "SAP connector"), ("Q1 2027", "forecasting module")):
        docs.append(
            Document(
                f"doc_roadmap_{quarter.lower().replace(' ', '_')}",
                f"Product roadmap {quarter}",
                "/Product/Roadmap",
                "2026-09-01T12:00:00Z",
                f"Roadmap {quarter}. Theme: enterprise readiness. Headline item: the {focus}. "
                f"Also planned: data residency in Frankfurt, SCIM provisioning, audit log export. "
                f"Customers asking most: {', '.join(rng.sample(companies, 3))}.",
            )
        )
    for name, when in (
        ("Hamburg logistics summit", "2026-11-12"),
        ("London customer day", "2026-10-21"),
    ):
        docs.append(
            Document(
                f"doc_event_{name.lower().replace(' ', '_')}",
                f"Event brief: {name}",
                "/Marketing/Events",
                "2026-08-20T11:00:00Z",
                f"Event brief for the {name} on {when}. Goal: {rng.randint(20, 60)} qualified "
                f"meetings. Booth staff: Kenji Sato, {rng.choice(_REPS)}. Budget: "
                f"{rng.randint(18, 60)}k EUR.",
            )
        )
    docs.append(
        Document(
            "doc_incident_review_2026_09_17",
            "Post-incident review: scanner sync outage 2026-09-17",
            "/Customer Success/Incidents",
            "2026-09-19T14:00:00Z",
            "On 2026-09-17 scanner devices could not sync for 2 hours 5 minutes. Cause: an "
            "expired certificate on the sync gateway. 14 customers affected, including "
            f"{', '.join(rng.sample(companies, 2))}. "
            "Fix: automated certificate renewal and an expiry alert.",
        )
    )
    return sorted(docs, key=lambda d: d.id)

"""Fake CRM leads: realistic-looking companies and contacts, deterministic for a seed.

Every email address is under example.com or example.org and every phone number uses a 555 or
other fictional block, so the demo data contains no real person's details.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["ACME_LEAD_ID", "INDUSTRIES", "STAGES", "Lead", "generate_leads"]

ACME_LEAD_ID = "LEAD-0137"
STAGES = ("Prospecting", "Qualification", "Proposal", "Negotiation", "Closed Won", "Closed Lost")
_STAGE_WEIGHTS = (25, 22, 18, 10, 15, 10)


@dataclass(frozen=True)
class Lead:
    id: str
    company: str
    contact_name: str
    title: str
    email: str
    phone: str
    country: str
    industry: str
    stage: str
    deal_value: int
    owner: str
    last_contact: str
    created: str
    notes: str


@dataclass(frozen=True)
class _Country:
    name: str
    suffixes: tuple[str, ...]
    phone: str  # "#" is a random digit


_COUNTRIES = (
    _Country("United States", ("Inc.", "LLC", "Corp."), "+1 415 555 01##"),
    _Country("United States", ("Inc.", "LLC"), "+1 312 555 01##"),
    _Country("Canada", ("Inc.", "Ltd."), "+1 416 555 01##"),
    _Country("United Kingdom", ("Ltd", "plc"), "+44 20 7946 0###"),
    _Country("Germany", ("GmbH", "AG"), "+49 30 5550 ####"),
    _Country("France", ("SA", "SAS"), "+33 1 55 50 ## ##"),
    _Country("Netherlands", ("BV", "NV"), "+31 10 555 0###"),
    _Country("Sweden", ("AB",), "+46 8 555 ### ##"),
    _Country("Spain", ("S.L.", "S.A."), "+34 91 555 ## ##"),
    _Country("Italy", ("S.p.A.", "S.r.l."), "+39 02 5550 ####"),
    _Country("Japan", ("K.K.",), "+81 3 5550 ####"),
    _Country("Australia", ("Pty Ltd",), "+61 2 5550 ####"),
    _Country("Brazil", ("Ltda.", "S.A."), "+55 11 5555 ####"),
    _Country("India", ("Pvt Ltd",), "+91 22 5555 ####"),
    _Country("Singapore", ("Pte Ltd",), "+65 6555 ####"),
    _Country("Finland", ("Oy",), "+358 9 555 ####"),
)

INDUSTRIES: dict[str, tuple[str, ...]] = {
    "Logistics": ("Logistics", "Freight", "Transport", "Shipping", "Cargo"),
    "Manufacturing": ("Manufacturing", "Industries", "Components", "Works"),
    "Retail": ("Retail", "Stores", "Outfitters", "Market"),
    "Healthcare": ("Health", "Medical", "Care"),
    "Financial Services": ("Capital", "Financial", "Insurance"),
    "Energy": ("Energy", "Power", "Renewables"),
    "Food & Beverage": ("Foods", "Beverages", "Brewing", "Farms"),
    "Software": ("Software", "Labs", "Systems", "Digital"),
    "Telecommunications": ("Telecom", "Networks"),
    "Automotive": ("Motors", "Automotive", "Mobility"),
    "Pharmaceuticals": ("Pharma", "Biotech", "Therapeutics"),
    "Education": ("Learning", "Academy", "Education"),
}

_PREFIXES = (
    "Blue Harbor",
    "Granite",
    "Summit",
    "Pioneer",
    "Silverline",
    "Cedar",
    "Lumen",
    "Nova",
    "Orbit",
    "Vertex",
    "Crescent",
    "Northgate",
    "Redwood",
    "Bright",
    "Ironbridge",
    "Meridian",
    "Keystone",
    "Solstice",
    "Tidewater",
    "Evergreen",
    "Falcon",
    "Horizon",
    "Juniper",
    "Kestrel",
    "Lakeside",
    "Maple",
    "Oakridge",
    "Polaris",
    "Quarry",
    "Riverbend",
    "Sterling",
    "Trident",
    "Unity",
    "Valley",
    "Westwind",
    "Zenith",
    "Alder",
    "Bluestone",
    "Copperleaf",
    "Driftwood",
    "Elmstead",
    "Foxglove",
    "Goldcrest",
    "Highland",
    "Ivory",
    "Jasper",
    "Kingsway",
    "Larkspur",
    "Mosaic",
    "Nimbus",
    "Oxbow",
    "Pinnacle",
    "Quicksilver",
    "Rosewood",
    "Saffron",
    "Thornbury",
)
_FIRST = (
    "Emma",
    "Liam",
    "Sophie",
    "Noah",
    "Mia",
    "Lucas",
    "Hannah",
    "Elias",
    "Chloe",
    "Mateo",
    "Aiko",
    "Haruto",
    "Priyanka",
    "Arjun",
    "Fatima",
    "Omar",
    "Ingrid",
    "Lars",
    "Giulia",
    "Marco",
    "Lucía",
    "Javier",
    "Amélie",
    "Théo",
    "Zoe",
    "Ethan",
    "Grace",
    "Daniel",
    "Olga",
    "Mikko",
    "Aino",
    "Rafael",
    "Beatriz",
    "Wei",
    "Lin",
    "Kwame",
    "Adaeze",
    "Sean",
    "Niamh",
    "Ravi",
)
_LAST = (
    "Fischer",
    "Martin",
    "Jansen",
    "Bakker",
    "Rossi",
    "Bianchi",
    "García",
    "López",
    "Nakamura",
    "Suzuki",
    "Sharma",
    "Patel",
    "Andersson",
    "Nilsson",
    "Virtanen",
    "Korhonen",
    "Silva",
    "Costa",
    "Chen",
    "Wong",
    "Smith",
    "Johnson",
    "Brown",
    "Taylor",
    "Murphy",
    "Kelly",
    "Dubois",
    "Lefevre",
    "Schneider",
    "Weber",
    "de Vries",
    "Visser",
    "Mensah",
    "Okafor",
    "Novak",
    "Kowalski",
    "Byrne",
    "Hughes",
    "Walsh",
    "Reddy",
)
_TITLES = (
    "VP Operations",
    "Head of Procurement",
    "CTO",
    "Director of IT",
    "COO",
    "Supply Chain Director",
    "Head of Logistics",
    "CFO",
    "IT Manager",
    "Operations Manager",
    "Head of Digital",
    "Warehouse Operations Lead",
    "Chief Data Officer",
    "Procurement Manager",
)
_OWNERS = (
    "Aisha Mbeki",
    "Sofia Lindqvist",
    "Ben Carter",
    "Mei Tanaka",
    "Jonas Becker",
    "Camille Dubois",
    "Rahul Iyer",
    "Olivia Grant",
    "Diego Ramos",
    "Marcus Oyelaran",
)
_NOTES = (
    "Intro call on {date}; interested in {product}.",
    "Asked for pricing for {n} sites.",
    "Met at {event}; follow-up demo booked.",
    "Also evaluating {competitor}.",
    "Champion is {first}; budget cycle starts in {month}.",
    "Needs {feature} before a decision.",
    "Security questionnaire received, due back in {n} days.",
    "Prefers email over calls; send the case study.",
    "Current contract with {competitor} ends in {month}.",
    "Requested a sandbox account for their IT team.",
    "Decision committee of {n}; procurement involved from the start.",
    "Downloaded the warehouse automation whitepaper twice.",
)
_NOTE_POOLS = {
    "product": ("Beacon Core", "Beacon Insights", "Beacon Connect", "Beacon Edge"),
    "event": ("the Hamburg logistics summit", "our London customer day", "the Chicago expo"),
    "competitor": ("Stackline", "Logisense", "Optivio", "FlowGrid"),
    "month": ("October", "November", "December", "January", "March"),
    "feature": (
        "SSO with SCIM",
        "the SAP connector",
        "data residency in the EU",
        "audit log export",
    ),
}

_ACME = Lead(
    id=ACME_LEAD_ID,
    company="Acme Corp",
    contact_name="Jordan Blake",
    title="VP Operations",
    email="jordan.blake@acme.example.com",
    phone="+31 10 555 0142",
    country="Netherlands",
    industry="Logistics",
    stage="Negotiation",
    deal_value=1_240_000,
    owner="Aisha Mbeki",
    last_contact="2026-10-02",
    created="2026-03-14",
    notes=(
        "Three-year deal for Beacon Core across 12 warehouses, pilot in Rotterdam done. "
        "Proposal v3 sent 2026-09-22. Open: first-year discount, liability cap, payment terms. "
        "Discussed in the Q3 2026 quarterly business review on 2026-10-06."
    ),
)


def _ascii_slug(text: str, sep: str = "") -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", sep, plain).strip(sep)


def _digits(pattern: str, rng: random.Random) -> str:
    return "".join(str(rng.randint(0, 9)) if ch == "#" else ch for ch in pattern)


def _date(rng: random.Random, start: dt.date, end: dt.date) -> dt.date:
    return start + dt.timedelta(days=rng.randint(0, (end - start).days))


def _note(rng: random.Random, first: str) -> str:
    picks = rng.sample(_NOTES, rng.randint(1, 3))

    def fill(match: re.Match[str]) -> str:
        slot = match.group(1)
        if slot == "n":
            return str(rng.randint(2, 30))
        if slot == "first":
            return first
        if slot == "date":
            return _date(rng, dt.date(2026, 2, 1), dt.date(2026, 9, 30)).isoformat()
        return rng.choice(_NOTE_POOLS[slot])

    return " ".join(re.sub(r"\{(\w+)\}", fill, note) for note in picks)


def generate_leads(seed: int, count: int = 300) -> list[Lead]:
    """`count` leads, one of which is the Acme Corp deal (`ACME_LEAD_ID`)."""
    rng = random.Random(seed)
    acme_index = int(ACME_LEAD_ID.rsplit("-", 1)[1])
    companies: set[str] = set()
    people: set[str] = set()
    leads: list[Lead] = []
    for number in range(1, count + 1):
        if number == acme_index:
            leads.append(_ACME)
            continue
        country = rng.choice(_COUNTRIES)
        industry = rng.choice(sorted(INDUSTRIES))
        while True:
            base = f"{rng.choice(_PREFIXES)} {rng.choice(INDUSTRIES[industry])}"
            if base not in companies:
                companies.add(base)
                break
        while True:
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            if f"{first} {last}" not in people:
                people.add(f"{first} {last}")
                break
        domain = f"{_ascii_slug(base, '-')}.{rng.choice(('example.com', 'example.org'))}"
        local = rng.choice(
            (
                f"{_ascii_slug(first)}.{_ascii_slug(last)}",
                f"{_ascii_slug(first)[0]}{_ascii_slug(last)}",
            )
        )
        last_contact = _date(rng, dt.date(2026, 3, 1), dt.date(2026, 9, 30))
        created = _date(rng, dt.date(2025, 6, 1), last_contact)
        value = min(900_000, max(5_000, round(rng.lognormvariate(math.log(60_000), 0.9), -2)))
        leads.append(
            Lead(
                id=f"LEAD-{number:04d}",
                company=f"{base} {rng.choice(country.suffixes)}",
                contact_name=f"{first} {last}",
                title=rng.choice(_TITLES),
                email=f"{local}@{domain}",
                phone=_digits(country.phone, rng),
                country=country.name,
                industry=industry,
                stage=rng.choices(STAGES, _STAGE_WEIGHTS)[0],
                deal_value=int(value),
                owner=rng.choice(_OWNERS),
                last_contact=last_contact.isoformat(),
                created=created.isoformat(),
                notes=_note(rng, first),
            )
        )
    return leads

"""A deterministic corpus of customer records for measuring the privacy layer's precision.

Each record holds values that must stay as they are (name, company, city, street, ids, dates,
amounts, a free-text note) beside the values that must be hidden (an e-mail address and a phone
number), built so that they share words: ``Kofi Okafor`` at ``kofi.okafor3@okafor-trading.com``,
``Okafor Trading`` with the domain ``okafor-trading.com``. A replacement of anything but the
e-mail address and the phone number is a false replacement.

``records(count, seed)`` gives the same records for the same arguments (no network, no clock).
``leaks(record)`` gives the ways code or an upstream may bring a hidden value back (case,
markup, spacing, slugs, truncation), each of which must be replaced.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["HIDDEN", "KEPT", "Record", "leaks", "records"]

FIRST = (
    "Kofi", "Maria", "Jordan", "Chloe", "Liam", "Aisha", "Mateo", "Yuki", "Noah", "Amara",
    "Lucas", "Priya", "Ethan", "Sofia", "Omar", "Hannah", "Diego", "Mei", "Samuel", "Fatima",
    "Lena", "Tariq", "Grace", "Ivan", "Zara", "Felix", "Nadia", "Hugo", "Elena", "Kwame",
    "Olivia", "Rafael", "Ingrid", "Jamal", "Clara", "Arjun", "Beatriz", "Tomas", "Leila", "Blake",
    "Jordan", "Morgan", "Taylor", "Avery", "Harper", "Rowan", "Quinn", "Reese", "Sage", "Drew",
)  # fmt: skip
LAST = (
    "Okafor", "Lopez", "Blake", "Chen", "Murphy", "Khan", "Garcia", "Tanaka", "Smith", "Mensah",
    "Silva", "Patel", "Brown", "Rossi", "Haddad", "Schmidt", "Fernandez", "Wong", "Adeyemi",
    "Hassan", "Novak", "Aziz", "Kelly", "Petrov", "Malik", "Weber", "Karimi", "Dubois",
    "Popescu", "Owusu", "Nielsen", "Costa", "Larsen", "Jackson", "Meyer", "Iyer", "Santos",
    "Kowalski", "Farah", "Green", "Stone", "Rivers", "Fields", "Banks", "Hill", "Wood", "Brooks",
)  # fmt: skip
TRADES = (
    "Trading", "Logistics", "Foods", "Labs", "Consulting", "Partners", "Systems", "Textiles",
    "Energy", "Health", "Studio", "Motors", "Analytics", "Supply", "Holdings", "Bakery",
)  # fmt: skip
SUFFIXES = ("Ltd", "Inc", "GmbH", "LLC", "SA", "", "", "")
CITIES = (
    "Accra", "Lagos", "Madrid", "Berlin", "London", "Toronto", "Osaka", "Lyon", "Nairobi",
    "Austin", "Porto", "Dublin", "Krakow", "Chennai", "Santiago", "Oslo", "Cairo", "Seattle",
    "Brisbane", "Denver", "Boston", "Phoenix", "Orlando", "Kingston", "Victoria", "Jordan",
)  # fmt: skip
STREETS = (
    "Harbour Road", "Market Street", "Station Lane", "High Street", "Mill Road", "Church Way",
    "Park Avenue", "Kingsway", "Riverside Drive", "Oak Street", "Elm Close", "Blake Street",
)  # fmt: skip
TLDS = ("com", "org", "net", "io", "co.uk", "de", "example.com", "example.org")
NOTES = (
    "{name} from {company} called about invoice {invoice}; follow up on {date}.",
    "Met {first} at the {city} office. {company} wants a quote for {amount} EUR.",
    "{first} {last} asked to move the delivery to {street}, {city}.",
    "Renewal for {company} ({website}) due {date}; contact {name}.",
    "{last} family account: {first} prefers calls in the morning.",
    "Order {order} shipped to {city} for {company}, {amount} USD.",
    "{name} ({company}) visited the {city} showroom on {date}.",
    "Ticket {ticket}: {first} reports that {website} is down.",
)


@dataclass(frozen=True)
class Record:
    """One customer: ``kept`` fields must come back as they are, ``hidden`` ones as tokens."""

    kept: dict[str, str]
    hidden: dict[str, str]

    def row(self) -> dict[str, str]:
        return {**self.kept, **self.hidden}


KEPT = ("id", "name", "first", "last", "company", "website", "city", "street", "order")
KEPT += ("invoice", "ticket", "date", "amount", "username", "note")
HIDDEN = ("email", "phone")


def _phone(rng: random.Random) -> str:
    shape = rng.randrange(3)
    if shape == 0:
        return f"+44 20 {rng.randint(7000, 7999)} {rng.randint(0, 9999):04d}"
    if shape == 1:
        return f"+1 {rng.randint(201, 989)}-{rng.randint(201, 989)}-{rng.randint(0, 9999):04d}"
    return f"+49 30 {rng.randint(1000000, 9999999)}"


def _slug(text: str, separator: str = "-") -> str:
    return separator.join(text.lower().split())


def records(count: int = 3000, seed: int = 23) -> list[Record]:
    """``count`` customer records, the same for the same ``seed``."""
    rng = random.Random(seed)
    out: list[Record] = []
    for number in range(1, count + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        name = f"{first} {last}"
        owner = rng.choice((last, first, rng.choice(LAST)))
        trade = rng.choice(TRADES)
        company = " ".join(filter(None, (owner, trade, rng.choice(SUFFIXES))))
        domain = f"{_slug(f'{owner} {trade}', rng.choice(('-', '')))}.{rng.choice(TLDS)}"
        local = rng.choice(
            (
                f"{first}.{last}",
                f"{first}.{last}{rng.randint(1, 99)}",
                f"{first[0]}{last}",
                f"{first}_{last[0]}",
                f"{first}",
                f"{last}.{first}",
            )
        ).lower()
        date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        fields = {
            "id": str(number),
            "name": name,
            "first": first,
            "last": last,
            "company": company,
            "website": f"https://www.{domain}/",
            "city": rng.choice(CITIES),
            "street": f"{rng.randint(1, 240)} {rng.choice(STREETS)}",
            "order": f"ORD-{rng.randint(10000, 99999)}",
            "invoice": f"INV-2024-{rng.randint(1, 9999):04d}",
            "ticket": f"T{rng.randint(100000, 999999)}",
            "date": date,
            "amount": f"{rng.randint(10, 99999)}.{rng.randint(0, 99):02d}",
            "username": f"{first.lower()}{rng.randint(100, 999)}",
        }
        fields["note"] = rng.choice(NOTES).format(**{**fields, "website": domain})
        hidden = {"email": f"{local}@{domain}", "phone": _phone(rng)}
        out.append(Record(fields, hidden))
    return out


def leaks(record: Record) -> Iterator[tuple[str, str, str]]:
    """``(field, shape, text)``: a hidden value brought back in a shape recall must catch."""
    email = record.hidden["email"]
    local, domain = email.split("@", 1)
    yield "email", "upper", f"contact {email.upper()} today"
    yield "email", "markup", f"contact {local}@[{domain}] today"
    yield "email", "spaced", f"write to {local} @ {domain}"
    yield "email", "at-dot", f"{_slug(local.replace('.', ' '), ' ')} at {domain.replace('.', ' ')}"
    yield "email", "slug", "doc-" + "-".join(_slug(email.replace(".", " ").replace("@", " ")))
    yield "email", "slug-id", "doc-" + _slug(email.replace(".", " ").replace("@", " "))
    yield "email", "prefix", f"invalid address {email[: max(len(local) + 4, 15)]!r} (truncated)"
    cut = max(0, len(local) - 3 - sum(not char.isalnum() for char in local[-3:]))
    yield "email", "suffix", f"field too long, it ends with {email[cut:]}"
    phone = record.hidden["phone"]
    digits = "".join(ch for ch in phone if ch.isdigit())
    yield "phone", "digits", f"tel {digits}"
    yield "phone", "suffix", f"call ...{digits[-8:]}"
    yield "phone", "markup", f"call **{phone}** now"

"""A two-hour quarterly business review transcript, generated from templates.

Deterministic for a given seed. Sentences are built from an optional opener, a topic-specific
core with filled slots and an optional tail, so the text reads like varied speech rather than one
line repeated; the size (about 50k o200k tokens) is set by a character budget per agenda item.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from codemode.demo import transcript_text as text
from codemode.demo import transcript_topics as topics

__all__ = ["MEETING_DATE", "MEETING_TITLE", "PARTICIPANTS", "meeting_transcript"]

MEETING_TITLE = "Q3 2026 Quarterly Business Review: Meeting Transcript"
MEETING_DATE = "2026-10-06"
# o200k averages about 4.6 characters per token on this text; 50k tokens over two hours.
_TARGET_CHARS = 205_000
_DURATION_S = 2 * 60 * 60


@dataclass(frozen=True)
class Participant:
    name: str
    role: str

    @property
    def first(self) -> str:
        return self.name.split()[0]


PARTICIPANTS: tuple[Participant, ...] = (
    Participant("Dana Whitfield", "CEO"),
    Participant("Priya Raman", "CFO"),
    Participant("Marcus Oyelaran", "VP Sales"),
    Participant("Aisha Mbeki", "Senior Account Executive"),
    Participant("Tomás Herrera", "Head of Customer Success"),
    Participant("Lena Vogel", "VP Product"),
    Participant("Kenji Sato", "Head of Marketing"),
)
_BY_FIRST = {p.first: p for p in PARTICIPANTS}


@dataclass(frozen=True)
class Segment:
    title: str
    minutes: int
    share: int  # percent of the transcript's characters
    speakers: tuple[str, ...]  # first names, lead speaker first
    cores: tuple[str, ...]


_SEGMENTS: tuple[Segment, ...] = (
    Segment("Opening and agenda", 5, 2, ("Dana", "Priya", "Marcus"), topics.OPENING),
    Segment("Q3 financial results", 14, 12, ("Priya", "Dana", "Marcus"), topics.FINANCE),
    Segment(
        "Pipeline review by region", 15, 17, ("Marcus", "Aisha", "Priya", "Dana"), topics.PIPELINE
    ),
    Segment(
        "Acme Corp deal deep dive",
        20,
        13,
        ("Aisha", "Marcus", "Priya", "Lena", "Dana"),
        topics.ACME,
    ),
    Segment(
        "Customer success: renewals, churn and escalations",
        15,
        14,
        ("Tomás", "Dana", "Lena", "Priya"),
        topics.SUCCESS,
    ),
    Segment("Product roadmap and releases", 15, 13, ("Lena", "Tomás", "Marcus"), topics.PRODUCT),
    Segment(
        "Marketing: campaigns, events and lead flow", 12, 10, ("Kenji", "Marcus"), topics.MARKETING
    ),
    Segment("Hiring and headcount", 8, 6, ("Dana", "Priya", "Lena", "Tomás"), topics.HIRING),
    Segment("Q4 forecast and targets", 9, 9, ("Priya", "Marcus", "Dana", "Aisha"), topics.FORECAST),
    Segment("Action items and wrap-up", 7, 4, ("Dana", "Aisha", "Priya", "Kenji"), topics.WRAPUP),
)

_SLOT = re.compile(r"\{(\w+)\}")
# Words that keep their capital after an opener such as "Honestly,".
_PROPER = frozenset(
    {p.name.split()[0] for p in PARTICIPANTS}
    | {"I", "I'm", "I'd", "I'll", "I've", "Acme", "Acme's", "Jordan", "Q3", "Q4", "SOC", "NPS"}
)
_LOWER_SLOTS = frozenset({"feature", "channel", "metric"})


class _Filler:
    """Fills `{slot}` placeholders with values drawn from one random stream."""

    def __init__(self, rng: random.Random, companies: Sequence[str]) -> None:
        self.rng = rng
        self.companies = [c for c in companies if "Acme" not in c] or ["Globex"]

    def value(self, slot: str, speaker: str, previous: str | None) -> str:
        r = self.rng
        match slot:
            case "pct":
                return f"{r.randint(2, 38)}%" if r.random() < 0.7 else f"{r.uniform(1, 19):.1f}%"
            case "money":
                return _money(r)
            case "n":
                return str(r.randint(2, 40))
            case "big":
                return str(r.randint(45, 420))
            case "company" | "company2":
                return r.choice(self.companies)
            case "person":
                return r.choice([p.first for p in PARTICIPANTS if p.first != speaker])
            case "prev":
                return previous or r.choice([p.first for p in PARTICIPANTS if p.first != speaker])
            case "weeks":
                return str(r.randint(2, 9))
            case "days":
                return str(r.randint(3, 21))
            case "date":
                return f"{r.choice(text.MONTHS)} {r.randint(2, 28)}"
            case _:
                return self.fill(r.choice(text.POOLS[slot]), speaker, previous)

    def fill(self, template: str, speaker: str, previous: str | None) -> str:
        return _SLOT.sub(lambda m: self.value(m.group(1), speaker, previous), template)


def _money(r: random.Random) -> str:
    if r.random() < 0.45:
        return f"${r.randint(40, 960)}k"
    return f"${r.uniform(1.0, 9.8):.1f}M"


def _starts_lowerable(template: str) -> bool:
    """Whether a sentence from `template` may lose its capital after an opener."""
    if template.startswith("{"):
        return template[1 : template.index("}")] in _LOWER_SLOTS
    first = template.split(" ", 1)[0].rstrip(",:;")
    return first not in _PROPER and not first.isupper()


def _capitalize(sentence: str) -> str:
    return sentence[0].upper() + sentence[1:]


class _Writer:
    def __init__(self, seed: int, companies: Sequence[str]) -> None:
        self.rng = random.Random(seed)
        self.filler = _Filler(self.rng, companies)
        self.seen: set[str] = set()
        self.uses: dict[str, int] = {}

    def _core(self, cores: Sequence[str], exclude: set[str]) -> str:
        """The least-used template wins most often; one without slots is said only once."""
        usable = [c for c in cores if c not in exclude and ("{" in c or self.uses.get(c, 0) == 0)]
        if not usable:
            usable = [c for c in text.GENERIC if "{" in c and c not in exclude]
        if not usable:
            usable = [c for c in (*cores, *text.GENERIC) if "{" in c]
        weights = [1.0 / (1 + self.uses.get(c, 0)) ** 2 for c in usable]
        core = self.rng.choices(usable, weights)[0]
        self.uses[core] = self.uses.get(core, 0) + 1
        exclude.add(core)
        return core

    def sentence(
        self, cores: Sequence[str], speaker: str, previous: str | None, exclude: set[str]
    ) -> str:
        r = self.rng
        candidate = ""
        for _ in range(8):
            core = self._core(cores, exclude)
            candidate = _capitalize(self.filler.fill(core, speaker, previous))
            plain = not core.startswith("Action item") and candidate.endswith(".")
            if plain and any(ch.isdigit() for ch in candidate) and r.random() < 0.3:
                tail = self.filler.fill(r.choice(text.TAILS), speaker, previous)
                candidate = f"{candidate[:-1]}{tail}."
            if plain and r.random() < 0.35:
                if _starts_lowerable(core):
                    candidate = candidate[0].lower() + candidate[1:]
                candidate = f"{r.choice(text.OPENERS)} {candidate}"
            if candidate not in self.seen:
                break
        self.seen.add(candidate)
        return candidate

    def turn(self, segment: Segment, speaker: str, previous: str | None) -> str:
        r = self.rng
        parts: list[str] = []
        if previous is not None and r.random() < 0.3:
            parts.append(self.filler.fill(r.choice(text.REACTIONS), speaker, previous))
        exclude: set[str] = set()
        for _ in range(r.choice((1, 2, 2, 3, 3, 3, 4, 4, 5, 6))):
            pool = text.GENERIC if r.random() < 0.08 else segment.cores
            parts.append(self.sentence(pool, speaker, previous, exclude))
        return " ".join(parts)

    def pick_speaker(self, segment: Segment, previous: str | None) -> str:
        names = list(segment.speakers) + [p.first for p in PARTICIPANTS]
        weights = [6.0 if i == 0 else 3.0 for i in range(len(segment.speakers))]
        weights += [0.4] * len(PARTICIPANTS)
        while True:
            choice = self.rng.choices(names, weights)[0]
            if choice != previous:
                return choice


def _timestamp(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def meeting_transcript(seed: int, companies: Sequence[str] = ()) -> str:
    """The full transcript text for `seed`; `companies` are other customers it may mention."""
    writer = _Writer(seed, companies)
    lines = [
        MEETING_TITLE,
        f"Date: {MEETING_DATE}, 10:00 to 12:00 CET. Location: Berlin office and video call.",
        "Participants: " + "; ".join(f"{p.name} ({p.role})" for p in PARTICIPANTS) + ".",
        "Agenda: " + "; ".join(f"{i}. {s.title}" for i, s in enumerate(_SEGMENTS, 1)) + ".",
        "Automatic transcription, lightly edited. Timestamps are from the start of the recording.",
        "",
    ]
    total_minutes = sum(s.minutes for s in _SEGMENTS)
    total_share = sum(s.share for s in _SEGMENTS)
    start_s = 0
    previous: str | None = None
    for number, segment in enumerate(_SEGMENTS, 1):
        span_s = _DURATION_S * segment.minutes // total_minutes
        budget = _TARGET_CHARS * segment.share // total_share
        turns: list[tuple[str, str]] = []
        used = 0
        while used < budget:
            speaker = writer.pick_speaker(segment, previous)
            words = writer.turn(segment, speaker, previous)
            turns.append((speaker, words))
            used += len(words) + 30
            previous = speaker
        lines.append(f"--- Agenda item {number}: {segment.title} ---")
        offset = 0
        for speaker, words in turns:
            at = start_s + 3 + span_s * offset // max(used, 1)
            person = _BY_FIRST[speaker]
            lines.append(f"[{_timestamp(at)}] {person.name}: {words}")
            offset += len(words) + 30
        lines.append("")
        start_s += span_s
    lines.append(f"[{_timestamp(_DURATION_S)}] Recording stopped.")
    return "\n".join(lines) + "\n"

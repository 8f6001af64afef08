"""The operator console's HTML: server-rendered tables and inline SVG charts, no script."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from codemode.audit.events import DECISIONS, OUTCOMES, AuditEvent, format_time
from codemode.gateway.web.ledger import SessionTokens
from codemode.gateway.web.page import document

__all__ = [
    "ApprovalRow",
    "SessionRow",
    "SkillRow",
    "audit_page",
    "login_page",
    "overview_page",
]

_NAV = (
    '<nav aria-label="Console"><a href="/console">Overview</a> · '
    '<a href="/console/audit">Audit log</a> · '
    '<form method="post" action="/console/logout" style="display:inline">'
    '<button type="submit">Sign out</button></form></nav>'
)
_TABLE_STYLE = (
    "<style>table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}"
    "th,td{border:1px solid #767676;padding:.3rem .5rem;text-align:left;vertical-align:top}"
    "th{background:#eee}label{display:inline-block;margin:.2rem .8rem .2rem 0}"
    "input,select{font:inherit;padding:.2rem}a{color:#0645ad}"
    "a:focus-visible,input:focus-visible,select:focus-visible{outline:3px solid #1a4fd6}</style>"
)


@dataclass(frozen=True)
class SessionRow:
    handle: str
    owner: str | None
    state: str
    age_s: float
    idle_s: float


@dataclass(frozen=True)
class ApprovalRow:
    approval: str
    session: str
    owner: str | None
    tool: str
    reason: str
    waiting_s: float


@dataclass(frozen=True)
class SkillRow:
    key: str
    description: str
    imports: int
    runs_ok: str  # "ok/runs", or "-" before any run
    state: str  # why it is stale, or its tests' last verdict
    visibility: str


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _table(caption: str, head: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    if not rows:
        return f"<h2>{escape(caption)}</h2><p>{escape(empty)}</p>"
    header = "".join(f'<th scope="col">{escape(h)}</th>' for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    label = "t-" + re.sub(r"[^a-z]+", "-", caption.lower())[:40]
    return (
        f'<h2 id="{label}">{escape(caption)}</h2><table aria-labelledby="{label}">'
        f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
    )


def login_page(error: str | None = None) -> str:
    problem = f'<p role="alert">{escape(error)}</p>' if error else ""
    body = f"""<h1>codemode console</h1>{problem}
<form method="post" action="/console/login">
<label for="token">Bearer token (an operator's: <code>[gateway] operators</code>)</label><br>
<input id="token" name="token" type="password" autocomplete="current-password" required size="40">
<button type="submit">Sign in</button>
</form>"""
    return document("codemode console: sign in", body)


def _ledger_chart(ledger: Sequence[SessionTokens], floor: int) -> str:
    """Per session, two bars: tokens used through codemode, and the tool-calling floor."""
    shown = ledger[-12:]
    if not shown:
        return "<p>No calls recorded yet.</p>"
    top = max([floor, *(entry.used for entry in shown)]) or 1
    width, bar = 560, 12
    rows = []
    for index, entry in enumerate(shown):
        y = index * 34 + 4
        used_w = max(1, round(entry.used / top * width))
        floor_w = max(1, round(floor / top * width))
        rows.append(
            f'<text x="0" y="{y + 10}" font-size="11">{escape(entry.session[:14])}</text>'
            f'<rect x="110" y="{y}" width="{used_w}" height="{bar}" fill="#0b5d1e">'
            f"<title>{entry.used:,} tokens through codemode</title></rect>"
            f'<rect x="110" y="{y + bar + 2}" width="{floor_w}" height="{bar}" fill="#8a1111">'
            f"<title>{floor:,} tokens of tool definitions (tool calling)</title></rect>"
        )
    height = len(shown) * 34 + 8
    return (
        f'<svg role="img" aria-labelledby="ledger-title" width="{width + 120}" '
        f'height="{height}" viewBox="0 0 {width + 120} {height}">'
        '<title id="ledger-title">Tokens per session: codemode (green) against the '
        "tool-calling floor (red)</title>" + "".join(rows) + "</svg>"
    )


def _timeline(points: Sequence[tuple[float, int]]) -> str:
    """Cumulative tokens through codemode over time, as a line."""
    if len(points) < 2:
        return ""
    start, end = points[0][0], points[-1][0]
    span = (end - start) or 1.0
    total, coords = 0, []
    final = sum(tokens for _, tokens in points) or 1
    for moment, tokens in points:
        total += tokens
        coords.append(f"{(moment - start) / span * 600:.1f},{120 - total / final * 110:.1f}")
    return (
        '<svg role="img" aria-label="Tokens through codemode over time, cumulative" width="620" '
        'height="130" viewBox="-10 0 620 130"><polyline fill="none" stroke="#0b5d1e" '
        f'stroke-width="2" points="{" ".join(coords)}"/></svg>'
        f"<p>{format_time(start)} to {format_time(end)}: {final:,} tokens in {len(points)} "
        "answers.</p>"
    )


def overview_page(
    sessions: Sequence[SessionRow],
    approvals: Sequence[ApprovalRow],
    skills: Sequence[SkillRow],
    ledger: Sequence[SessionTokens],
    floor: int,
    points: Sequence[tuple[float, int]],
) -> str:
    session_rows = [
        [
            f"<code>{escape(s.handle)}</code>",
            escape(s.owner or "-"),
            escape(s.state),
            _duration(s.age_s),
            _duration(s.idle_s),
        ]
        for s in sessions
    ]
    approval_rows = [
        [
            f"<code>{escape(a.tool)}</code>",
            f"<code>{escape(a.session)}</code>",
            escape(a.owner or "-"),
            _duration(a.waiting_s),
            escape(a.reason),
        ]
        for a in approvals
    ]
    skill_rows = [
        [
            f"<code>{escape(k.key)}</code>",
            escape(k.description[:160]),
            str(k.imports),
            escape(k.runs_ok),
            escape(k.state),
            escape(k.visibility),
        ]
        for k in skills
    ]
    ledger_rows = [
        [
            f"<code>{escape(entry.session)}</code>",
            escape(entry.owner or "-"),
            str(entry.calls),
            f"{entry.used:,}",
            f"{floor:,}",
        ]
        for entry in ledger
    ]
    body = (
        _TABLE_STYLE
        + "<h1>codemode console</h1>"
        + _NAV
        + _table(
            "Sessions",
            ["Session", "Owner", "State", "Age", "Idle"],
            session_rows,
            "No sessions right now.",
        )
        + _table(
            "Pending approvals",
            ["Tool", "Session", "Owner", "Waiting", "Why"],
            approval_rows,
            "Nothing waits for an approval.",
        )
        + _table(
            "Skills",
            ["Skill", "What it does", "Imports", "Runs ok", "Tests / staleness", "Visibility"],
            skill_rows,
            "No skills saved yet.",
        )
        + "<h2>Token ledger</h2>"
        + "<p>Per session: <strong>green</strong>, tokens through codemode; "
        "<strong>red</strong>, the tool-calling floor. Below: tokens over time.</p>"
        + _ledger_chart(ledger, floor)
        + _timeline(points)
        + _table(
            "Tokens per session",
            ["Session", "Owner", "Answers", "Tokens via codemode", "Tool-calling floor"],
            ledger_rows,
            "No calls recorded yet.",
        )
        + "<p class=note>The floor is every tool definition of the catalog, which a "
        "tool-calling client loads into context once per session; the tool results it "
        "would also carry are not counted.</p>"
    )
    return document("codemode console", body)


def audit_page(events: Sequence[AuditEvent], filters: Mapping[str, str]) -> str:
    def choice(name: str, options: Sequence[str]) -> str:
        current = filters.get(name, "")
        items = ['<option value="">any</option>'] + [
            f"<option{' selected' if option == current else ''}>{escape(option)}</option>"
            for option in options
        ]
        return (
            f'<label for="{name}">{name.capitalize()}</label>'
            f'<select id="{name}" name="{name}">{"".join(items)}</select>'
        )

    def text(name: str, hint: str) -> str:
        return (
            f'<label for="{name}">{name.capitalize()}</label><input id="{name}" name="{name}" '
            f'value="{escape(filters.get(name, ""))}" placeholder="{escape(hint)}">'
        )

    form = (
        '<form method="get" action="/console/audit" aria-label="Filter the audit log">'
        + text("session", "s_...")
        + text("tool", "crm.*")
        + choice("decision", DECISIONS)
        + choice("outcome", OUTCOMES)
        + '<button type="submit">Filter</button></form>'
    )
    rows = [
        [
            escape(format_time(e.time)),
            f"<code>{escape(e.session)}</code>",
            f"<code>{escape(e.qualified_name)}</code>",
            escape(e.decision),
            escape(e.outcome),
            f"{e.duration_ms:.0f} ms",
            escape(e.message) + (f" ({e.count}x)" if e.count > 1 else ""),
        ]
        for e in events
    ]
    now = time.time()
    body = (
        _TABLE_STYLE
        + "<h1>Audit log</h1>"
        + _NAV
        + form
        + _table(
            f"Newest {len(rows)} calls (as of {format_time(now)})",
            ["Time", "Session", "Tool", "Decision", "Outcome", "Took", "Message"],
            rows,
            "No calls match.",
        )
    )
    return document("codemode console: audit log", body)

"""The approval page's HTML: server-rendered, one screen, no script, every value escaped."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from codemode.gateway.web.links import ApprovalLink

__all__ = ["approval_page", "document", "message_page"]

_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;margin:0 auto;max-width:56rem;padding:1rem;
color:#111;background:#fff}
h1{font-size:1.4rem}
pre{background:#f3f3f3;border:1px solid #767676;padding:.6rem;overflow:auto;
white-space:pre-wrap;word-break:break-word;max-height:18rem}
dt{font-weight:600}dd{margin:0 0 .6rem 0}
fieldset{border:1px solid #767676;padding:.6rem}
button{font:inherit;padding:.5rem 1rem;margin:.3rem .5rem 0 0;border:2px solid #111;
border-radius:4px;background:#fff;color:#111;cursor:pointer}
button.allow{background:#0b5d1e;color:#fff;border-color:#0b5d1e}
button.deny{background:#8a1111;color:#fff;border-color:#8a1111}
button:focus-visible{outline:3px solid #1a4fd6;outline-offset:2px}
.note{color:#333}
"""


def document(title: str, body: str) -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def _json(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, indent=2, default=repr))


def _flow_items(flows: list[str]) -> str:
    if not flows:
        return "<li>No hidden personal data in these arguments.</li>"
    return "".join(f"<li>{escape(line)}</li>" for line in flows)


def approval_page(link: ApprovalLink, action: str) -> str:
    approval = link.approval
    tool = str(approval["tool"])
    printed = link.printed or "(nothing printed before the pause)"
    body = f"""
<h1>Approve {escape(tool)}?</h1>
<p class="note">The agent's code paused before this call. It runs only if you allow it; the
values below are your own data, shown to you and never to the model.</p>
<dl>
<dt>Tool</dt><dd><code>{escape(tool)}</code></dd>
<dt>Why it needs approval</dt><dd>{escape(str(approval.get("reason", "")))}</dd>
<dt id="args-label">Arguments (with your values)</dt>
<dd><pre aria-labelledby="args-label" data-testid="arguments">{_json(link.revealed)}</pre></dd>
<dt>Digest of the call as checked</dt><dd><code data-testid="digest">{
        escape(str(approval.get("digest", "")))
    }</code></dd>
<dt id="out-label">Printed before the pause</dt>
<dd><pre aria-labelledby="out-label" data-testid="printed">{escape(printed)}</pre></dd>
<dt id="flows-label">Where your data goes</dt>
<dd><ul aria-labelledby="flows-label" data-testid="flows">{_flow_items(link.flows)}</ul></dd>
<dt>Session</dt><dd><code>{escape(str(link.session or ""))}</code></dd>
</dl>
<form method="post" action="{escape(action)}">
<input type="hidden" name="csrf" value="{escape(link.csrf)}">
<fieldset><legend>Your decision</legend>
<button class="allow" type="submit" name="decision" value="allow_call">Allow once</button>
<button type="submit" name="decision" value="allow_tool">Allow {
        escape(tool)
    } for this session</button>
<button class="deny" type="submit" name="decision" value="deny">Deny</button>
</fieldset>
</form>
"""
    return document(f"Approve {tool}?", body)


def message_page(title: str, text: str) -> str:
    return document(title, f'<h1>{escape(title)}</h1><p role="status">{escape(text)}</p>')

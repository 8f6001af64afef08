"""Reading what a model wrote: a JSON envelope ``{"thoughts", "code"}`` or fenced code.

Models get the format wrong in many small ways: prose around the JSON, the JSON inside a
fence, raw newlines inside JSON strings, the whole envelope as one JSON string, code whose
newlines arrived as ``\\n``, an unclosed fence when the answer was cut. Each is accepted when
the intent is unambiguous; anything else is ``Malformed`` with a one-line reason. Nothing here
raises on any input.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from codemode.agent.actions import Action, Execute, Finish, Malformed, Search
from codemode.search.render import DEFAULT_HEAD as DEFAULT_LIMIT

__all__ = [
    "MAX_REPLY_CHARS",
    "fenced_blocks",
    "final_answer",
    "parse_envelope",
    "parse_fenced",
    "parse_search_arguments",
]

MAX_REPLY_CHARS = 200_000
_FENCE = re.compile(
    r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.M | re.S
)
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", ""})
# Also the full-width colon that models writing Chinese or Japanese use.
_FINAL = re.compile(r"^[ \t>*_#]*final[ _]answer[ \t*_]*[:\uff1a][ \t*_]*(.*)", re.I | re.M | re.S)
_THOUGHT_KEYS = ("thoughts", "thought", "plan", "reasoning", "analysis")
_ANSWER_KEYS = ("answer", "final_answer", "final")
_SEARCH_KEYS = ("search", "query")
_DETAILS = frozenset({"name", "summary", "full"})
_MAX_CANDIDATES = 20


def _clean(code: str) -> str:
    """Code as it should run: no blank lines around it, no indentation common to all lines."""
    return textwrap.dedent(code.strip("\n")).rstrip()


def _too_long(text: str) -> Malformed | None:
    if len(text) > MAX_REPLY_CHARS:
        return Malformed(
            f"the answer was {len(text):,} characters; keep it under {MAX_REPLY_CHARS:,} "
            "(put data in files, not in the answer)"
        )
    return None


# --- fenced code --------------------------------------------------------------------------------


def fenced_blocks(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    """Every fenced block as (language tag, body, span); an unclosed fence runs to the end."""
    return [
        (match.group(1).lower(), match.group(2), match.span()) for match in _FENCE.finditer(text)
    ]


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    kept, last = [], 0
    for start, end in spans:
        kept.append(text[last:start])
        last = end
    kept.append(text[last:])
    return "\n".join(part.strip() for part in kept if part.strip())


def _compiles(code: str) -> bool:
    try:
        compile(code, "<answer>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    return True


def _looks_like_bare_code(text: str) -> bool:
    stripped = text.strip()
    starts = ("import ", "from ", "print(", "def ", "for ", "with ", "class ", "#")
    return bool(stripped) and stripped.startswith(starts) and _compiles(stripped)


def _unescape_code(code: str) -> str:
    """Code whose newlines arrived as the two characters backslash-n (a JSON string escaped
    twice): unescape only when that turns code that does not compile into code that does."""
    if "\n" in code.strip() or "\\n" not in code:
        return code
    unescaped = code.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')
    if not _compiles(code) and _compiles(unescaped):
        return unescaped
    return code


def _strip_fence(code: str) -> str:
    blocks = fenced_blocks(code)
    if blocks and blocks[0][0] in _PYTHON_TAGS and code.strip().startswith("```"):
        return blocks[0][1]
    return code


def parse_fenced(text: str) -> tuple[str, Action]:
    """Plan, then a ```python block (execute), a ```search block, or FINAL ANSWER: text."""
    if (too_long := _too_long(text)) is not None:
        return "", too_long
    blocks = fenced_blocks(text)
    thoughts = _outside(text, [span for _, _, span in blocks])
    python = [body for tag, body, _ in blocks if tag in _PYTHON_TAGS and body.strip()]
    if python:
        return _strip_final(thoughts), Execute(_clean(_unescape_code("\n\n".join(python))))
    searches = [body.strip() for tag, body, _ in blocks if tag == "search" and body.strip()]
    if searches:
        return _strip_final(thoughts), Search(searches[0].splitlines()[0].strip())
    if (final := final_answer(text)) is not None:
        return final[0], Finish(final[1])
    if not blocks:
        if _looks_like_bare_code(text):
            return "", Execute(_clean(text))
        envelope_thoughts, action = _envelope_action(text)
        if not isinstance(action, Malformed):
            return envelope_thoughts, action
    others = sorted({tag for tag, _, _ in blocks if tag not in _PYTHON_TAGS})
    if others:
        return thoughts, Malformed(
            f"only Python runs here (got a ```{others[0]} block): put the code in a ```python block"
        )
    return thoughts, Malformed(
        "no code found: write a ```python block, a ```search block, or FINAL ANSWER: ..."
    )


def final_answer(text: str) -> tuple[str, str] | None:
    """(the text before it, the answer) when ``text`` has a FINAL ANSWER: line, else None."""
    final = _FINAL.search(text)
    if final is None or not final.group(1).strip():
        return None
    return text[: final.start()].strip(), final.group(1).strip()


def _strip_final(thoughts: str) -> str:
    match = _FINAL.search(thoughts)
    return thoughts[: match.start()].strip() if match else thoughts


# --- the JSON envelope --------------------------------------------------------------------------


def _balanced_object(text: str, start: int) -> str | None:
    """The text of the JSON object starting at ``start`` (strings may hold raw newlines)."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
    return None


def _loads(candidate: str) -> Any:
    try:
        # strict=False: raw newlines and tabs inside strings are accepted.
        value = json.loads(candidate, strict=False)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, str) and value.strip().startswith("{"):  # the envelope as a string
        try:
            value = json.loads(value, strict=False)
        except (ValueError, RecursionError):
            return None
    return value


def _candidates(text: str) -> list[str]:
    found = [text.strip()]
    found += [body for tag, body, _ in fenced_blocks(text) if tag in ("json", "", "javascript")]
    position = text.find("{")
    while position != -1 and len(found) < _MAX_CANDIDATES:
        block = _balanced_object(text, position)
        if block is None:  # unbalanced to the end: a later start would scan it all again
            break
        found.append(block)
        position = text.find("{", position + len(block))
    return found


def _first(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(key).lower(): value for key, value in data.items()}
    for key in keys:
        if key in lowered and lowered[key] is not None:
            return lowered[key]
    return None


def _from_object(data: dict[str, Any]) -> tuple[str, Action]:
    thoughts_value = _first(data, _THOUGHT_KEYS)
    thoughts = thoughts_value if isinstance(thoughts_value, str) else ""
    code = _first(data, ("code",))
    if code is not None:
        if not isinstance(code, str):
            return thoughts, Malformed('"code" must be a string of Python')
        if code.strip():
            return thoughts, Execute(_clean(_unescape_code(_strip_fence(code))))
    query = _first(data, _SEARCH_KEYS)
    if isinstance(query, str) and query.strip():
        return thoughts, Search(query.strip())
    answer = _first(data, _ANSWER_KEYS)
    if answer is not None and str(answer).strip():
        return thoughts, Finish(answer if isinstance(answer, str) else json.dumps(answer))
    if code is not None:
        return thoughts, Malformed('"code" is empty: put the Python to run in it')
    return thoughts, Malformed('the JSON object has no "code", "search" or "answer"')


def _envelope_action(text: str) -> tuple[str, Action]:
    for candidate in _candidates(text):
        value = _loads(candidate)
        if isinstance(value, dict):
            return _from_object(value)
    return "", Malformed("no JSON object found")


def parse_envelope(text: str) -> tuple[str, Action]:
    """``{"thoughts": ..., "code": ...}`` (or "search", or "answer"); fenced code is accepted
    as a fallback."""
    if (too_long := _too_long(text)) is not None:
        return "", too_long
    thoughts, action = _envelope_action(text)
    if not isinstance(action, Malformed) or action.problem != "no JSON object found":
        return thoughts, action
    fenced_thoughts, fenced = parse_fenced(text)
    if isinstance(fenced, Execute | Search):
        return fenced_thoughts, fenced
    return "", Malformed(
        'no JSON object found: answer with one object such as {"thoughts": "...", "code": "..."}'
    )


def parse_search_arguments(arguments: dict[str, Any], call_id: str | None) -> Action:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return Malformed('search needs a "query" string', call_id)
    detail = arguments.get("detail", "summary")
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = DEFAULT_LIMIT
    return Search(
        query.strip(),
        detail if detail in _DETAILS else "summary",
        max(1, min(limit, 20)),
        call_id,
    )

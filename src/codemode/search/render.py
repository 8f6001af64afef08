"""Search answers as the model reads them, at three detail levels.

``name``: ``module.function`` per line. ``summary`` (default): the best few hits with their
one-line signature and the first sentence of the description, then a thin tail of further
candidates by name, so the right function is usually named even when it is not first.
``full``: the generated stub module of each tool (its Python source with the whole docstring,
the function before the types it uses), cut into parts of at most ``PART_TOKENS`` tokens, the
rest one ``part=`` away. Every answer starts with how to import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

from codemode.errors import UsageError
from codemode.search.hit import Hit

__all__ = [
    "DEFAULT_DETAIL",
    "DEFAULT_HEAD",
    "DEFAULT_TAIL",
    "PART_TOKENS",
    "Detail",
    "SourceLookup",
    "check_detail",
    "answer_head",
    "answer_size",
    "check_part",
    "render_answer",
    "source_parts",
]

Detail = Literal["name", "summary", "full"]
DEFAULT_DETAIL: Detail = "summary"
DETAILS: tuple[str, ...] = get_args(Detail)
# The default answer's shape, chosen on the benchmark's dev split (docs/search.md, "The first
# answer"): this many hits with signatures, then this many more by name.
DEFAULT_HEAD = 3
DEFAULT_TAIL = 28
# One function's text at detail="full" is cut into parts so that an answer showing one part
# (import line, name and pointer to the next part included) costs at most this many o200k tokens.
PART_TOKENS = 800
# (server, tool) -> the stub module's source, e.g. ``StubLibrary(specs).tool_source``.
SourceLookup = Callable[[str, str], str]


def check_detail(value: str) -> Detail:
    if value not in DETAILS:
        raise UsageError(f"unknown detail level {value!r}", fix=f"use one of: {', '.join(DETAILS)}")
    return value  # type: ignore[return-value]


def check_part(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(
            f"`part` must be a positive integer, got {value!r}",
            fix="pass part=2 for the second part of a function cut at detail='full'",
        )
    return value


def answer_size(query: str, detail: Detail, limit: int) -> int:
    """How many hits an answer needs: at ``summary`` the ``limit`` best with signatures and a
    tail of ``DEFAULT_TAIL`` more; every function a query of Python names names."""
    from codemode.search.names import names_query

    wanted = max(limit, names_query(query))
    return wanted + DEFAULT_TAIL if detail == "summary" else wanted


def answer_head(query: str, hits: Sequence[Hit], limit: int) -> int:
    """How many of ``hits`` get signatures: ``limit``, or all when the query named them by
    Python name (``search("stripe.post_refunds")``)."""
    from codemode.search.names import names_query

    named = names_query(query)
    if named and len(hits) <= named:
        return len(hits)
    return limit


def _header(hits: Sequence[Hit]) -> str:
    from codemode.stubs.naming import code_name

    modules = dict.fromkeys(hit.module for hit in hits)
    named = (m if code_name(m) == m else f"{m} as {code_name(m)}" for m in modules)
    return f"from servers import {', '.join(named)}"


def _in_code(hit: Hit) -> str:
    """``module.function`` as code that imported the module by ``_header`` calls it."""
    from codemode.stubs.naming import code_name

    return f"{code_name(hit.module)}.{hit.function}"


def render_answer(
    hits: Sequence[Hit],
    detail: Detail = DEFAULT_DETAIL,
    *,
    source: SourceLookup | None = None,
    head: int | None = None,
    part: int = 1,
) -> str:
    """The text returned to the model for ``hits`` (best first).

    At ``summary``, the first ``head`` hits (all when None) get signatures and the rest form the
    tail. At ``full``, each hit shows part ``part`` of its source."""
    if not hits:
        return "No matching tools. Try other words, e.g. the resource and the action."
    shown = hits if head is None else hits[:head]
    tail = hits[len(shown) :] if detail == "summary" else []
    lines = [_header([*shown, *tail])]
    if detail == "name":
        lines += [_in_code(hit) for hit in shown]
    elif detail == "summary" or source is None:
        for hit in shown:
            lines.append(f"{_in_code(hit).rsplit('.', 1)[0]}.{hit.signature}")
            if hit.summary:
                lines.append(f"  {hit.summary}")
        if tail:
            lines += _tail_lines(tail)
    else:
        for hit in shown:
            lines.append(f"# {hit.python_name}")
            lines.append(_full_part(hit, source(hit.server, hit.tool), part))
    return "\n".join(lines)


def _tail_lines(tail: Sequence[Hit]) -> list[str]:
    """Further candidates by name only, grouped by module in rank order (a few words of
    summary each cost more tokens than further names: measured, docs/search.md)."""
    by_module: dict[str, list[str]] = {}
    for hit in tail:
        by_module.setdefault(_in_code(hit).rsplit(".", 1)[0], []).append(hit.function)
    lines = ['More candidates (search("module.function") shows one):']
    lines += [f"{module}: {', '.join(names)}" for module, names in by_module.items()]
    return lines


def source_parts(text: str, budget: int = PART_TOKENS) -> list[str]:
    """``text`` cut at line ends into parts of at most ``budget`` o200k tokens (a single longer
    line is cut inside)."""
    from codemode.tokens import count_tokens_many

    lines = text.rstrip().splitlines()
    sizes = count_tokens_many([line + "\n" for line in lines]) if lines else []
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for whole, whole_size in zip(lines, sizes, strict=True):
        line, size = whole, whole_size
        if current and used + size > budget:
            parts.append("\n".join(current))
            current, used = [], 0
        while size > budget:  # one huge line: cut by characters, in proportion
            cut = max(1, len(line) * budget // size)
            parts.append(line[:cut])
            line = line[cut:]
            size = count_tokens_many([line])[0]
        current.append(line)
        used += size
    if current or not parts:
        parts.append("\n".join(current))
    return parts


def _function_first(text: str, function: str) -> str:
    """The stub module with its function (signature, docstring, body) moved before the types
    it uses, so the first part holds what is called and how."""
    start = text.find(f"\ndef {function}(")
    if start < 0:
        return text
    head, rest = text[:start], text[start + 1 :]
    end = head.find('"""', head.find('"""') + 3) if head.count('"""') >= 2 else -1
    cut = head.find("\n", end) + 1 if end >= 0 else 0
    return head[:cut] + "\n" + rest.rstrip() + "\n\n" + head[cut:].strip("\n")


def _pointer(hit: Hit, part: int, total: int) -> str:
    return (
        f"# … cut here (part {part} of {total}): "
        f'search("{hit.python_name}", detail="full", part={part + 1}) shows the rest'
    )


def _full_part(hit: Hit, text: str, part: int) -> str:
    from codemode.tokens import count_tokens

    # The answer's own lines for this hit come out of its budget, so one part costs at most
    # PART_TOKENS whatever the names' length.
    frame = f"from servers import {hit.module}\n# {hit.python_name}\n{_pointer(hit, 99, 99)}"
    parts = source_parts(_function_first(text, hit.function), PART_TOKENS - count_tokens(frame) - 4)
    if part > len(parts):
        return (
            f"# {hit.python_name} has {len(parts)} part(s); part {part} does not exist: "
            f'use part=1 to {len(parts)}, e.g. search("{hit.python_name}", detail="full")'
        )
    body = parts[part - 1]
    if part < len(parts):
        body += "\n" + _pointer(hit, part, len(parts))
    return body

"""Optional re-ranking by the client's own model (MCP sampling), under a strict token budget.

When the MCP client offers sampling, the gateway can pass the top hits of a search to
``rerank_with_model`` with an ``ask`` function that sends one prompt through
``sampling/createMessage``. The model sees the task and a numbered list (Python name and first
sentence of each tool, trimmed to fit ``budget_tokens``) and answers with numbers; its picks move
to the front, the rest keep their order. Never required: any failure (no answer, an answer
without usable numbers, a timeout, an error) returns the hits unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence

from codemode.search.base import Hit

__all__ = ["Ask", "build_prompt", "parse_choice", "rerank_with_model"]

log = logging.getLogger("codemode.search")

# (prompt, max_tokens) -> the model's text. The gateway wraps MCP sampling in this.
Ask = Callable[[str, int], Awaitable[str]]

_NUMBER = re.compile(r"\d+")
_SUMMARY_STEPS = (160, 80, 40, 0)  # summary lengths tried, longest first, to fit the budget


def build_prompt(query: str, hits: Sequence[Hit], budget_tokens: int) -> tuple[str, int]:
    """The prompt and how many of ``hits`` it lists (fewer, and shorter lines, to fit)."""
    from codemode.tokens import count_tokens

    head = f"Pick the tools that do this task, best first.\nTask: {query.strip()[:300]}\nTools:\n"
    tail = (
        "\nAnswer with the numbers of the tools that fit, best first, separated by commas "
        "(at most 5), and nothing else."
    )

    def fits(lines: list[str]) -> str | None:
        prompt = head + "\n".join(lines) + tail
        return prompt if count_tokens(prompt) <= budget_tokens else None

    for length in _SUMMARY_STEPS:
        lines = [_line(i, hit, length) for i, hit in enumerate(hits, 1)]
        if (prompt := fits(lines)) is not None:
            return prompt, len(lines)
    for count in range(len(hits) - 1, 1, -1):  # names alone are too long: list fewer tools
        if (prompt := fits(lines[:count])) is not None:
            return prompt, count
    return "", 0


def _line(number: int, hit: Hit, length: int) -> str:
    summary = hit.summary[:length].rstrip() if length else ""
    return f"{number}. {hit.python_name}" + (f": {summary}" if summary else "")


def parse_choice(answer: str, count: int) -> list[int]:
    """1-based numbers in ``answer`` that name one of ``count`` tools, first mention kept."""
    picked: list[int] = []
    for token in _NUMBER.findall(answer):
        number = int(token)
        if 1 <= number <= count and number not in picked:
            picked.append(number)
    return picked


async def rerank_with_model(
    query: str,
    hits: Sequence[Hit],
    ask: Ask,
    *,
    top: int = 20,
    budget_tokens: int = 1200,
    answer_tokens: int = 30,
    timeout_s: float = 10.0,
) -> list[Hit]:
    """``hits`` with the model's picks among the first ``top`` moved to the front, in its order.

    The prompt never exceeds ``budget_tokens`` (o200k tokens) and the answer is capped at
    ``answer_tokens``; a failure of any kind keeps the original order."""
    import anyio

    hits = list(hits)
    if len(hits) < 2:
        return hits
    prompt, count = build_prompt(query, hits[:top], budget_tokens)
    if count < 2:
        return hits
    try:
        with anyio.fail_after(timeout_s):
            answer = await ask(prompt, answer_tokens)
    except Exception as error:  # noqa: BLE001 - the client's model is a bonus, never required
        log.info("model re-ranking skipped: %s", error)
        return hits
    picked = parse_choice(answer, count)
    if not picked:
        return hits
    chosen = [hits[number - 1] for number in picked]
    return chosen + [hit for i, hit in enumerate(hits, 1) if i not in picked]

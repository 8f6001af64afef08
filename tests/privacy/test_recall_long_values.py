"""A long value the vault holds that repeats its words (a contract's clauses, a log) is
compared with a text once per common run, not once per shared 8-character piece: its pieces
recur hundreds of times, and reading a 20 KB text against a 100 KB value took over two
minutes. A fragment of it is still found."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.privacy import recall as recall_module
from codemode.privacy.recall import Recall
from codemode.privacy.vault import TokenSource, Vault

NOTE = "".join(f"clause {n} of the settlement between the parties; " for n in range(300))


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many common runs the recall has measured (one entry per run)."""
    runs: list[int] = []
    common_run = recall_module.common_run

    def counted(*args: Any) -> Any:
        runs.append(1)
        return common_run(*args)

    monkeypatch.setattr(recall_module, "common_run", counted)
    return runs


def recall_of(value: str) -> tuple[Recall, str]:
    vault = Vault()
    [token] = vault.tokens_for([("NOTE", value)], TokenSource("crm", "get_contract", "text"))
    recall = Recall(vault)
    recall.refresh()
    return recall, token


def test_a_text_too_short_for_any_fragment_of_a_value_is_not_compared_with_it(
    compared: list[int],
) -> None:
    recall, _token = recall_of(NOTE)
    assert recall.find(NOTE[:2000], decode=False) == []  # shorter than a fragment (40%)
    assert compared == []  # it was 383,968 runs measured


def test_a_text_that_shares_words_with_a_long_value_is_compared_once_per_run(
    compared: list[int],
) -> None:
    recall, _token = recall_of(NOTE)
    other = "".join(
        f"clause {n + 1000} of the settlement between the parties; " for n in range(140)
    )
    assert recall.find(other, decode=False) == []
    assert 0 < len(compared) < 100_000  # it was 1,321,115


def test_a_fragment_of_a_long_value_is_still_found(compared: list[int]) -> None:
    recall, token = recall_of(NOTE)
    cut = NOTE[: NOTE.index("clause 150 ")]
    [hit] = recall.find(f"Contract: {cut}", decode=False)
    assert hit.entry.token == token and (hit.start, hit.end) == (10, 10 + len(cut.rstrip("; ")))
    assert len(compared) == 1

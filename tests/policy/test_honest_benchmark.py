"""A one-round smoke run of benchmarks/honest.py: honest work through the real engine trips no
guard it should not (the figures, never the timing)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "honest.py"


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("honest_benchmark", BENCH)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        import asyncio
        import tempfile

        with tempfile.TemporaryDirectory(prefix="codemode-honest-") as tmp:
            tally = asyncio.run(module.run(1, Path(tmp)))
        return dict(module.report(tally, 0.0))
    finally:
        sys.modules.pop(spec.name, None)


def test_honest_work_needs_only_the_approvals_it_really_needs(figures: dict[str, Any]) -> None:
    assert figures["calls"] >= 100
    assert figures["approvals_needed"] == 2  # ten ticket updates (remembered), one email
    assert figures["approvals_asked"] == figures["approvals_needed"]
    assert figures["needless_per_1000_calls"] == 0
    assert figures["refused_honest_calls"] == 0
    assert figures["refusals_after_approval"] == 0
    assert figures["by_workflow"]["tickets"]["asked"] == 1
    assert figures["by_workflow"]["schema"]["asked"] == 0  # read_only_tools is enough


def test_values_that_are_not_personal_data_reach_the_code(figures: dict[str, Any]) -> None:
    assert figures["false_replacements"] == 0
    assert figures["guard_message_tokens"] > 0  # the two approvals were shown


@pytest.mark.xfail(
    strict=True,
    reason="the vault's fragment recall takes a customer's name for a fragment of the e-mail "
    "address seen before (maria.lopez0@example.com), so later results show the name as "
    "<EMAIL_1> and writes receive the address as the name (privacy.recall, issue 23)",
)
def test_names_reach_the_code_and_the_address_book_intact(figures: dict[str, Any]) -> None:
    assert figures["names_seen_as_tokens"] == 0
    assert figures["corrupted_writes"] == 0

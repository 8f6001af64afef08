"""The README's demo figures are the demo's current output (scripts/readme_figures.py): a real
run of `codemode demo` checked against the README, and the checker itself on made-up figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location(
        "readme_figures", ROOT / "scripts/readme_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_figures"] = module
    spec.loader.exec_module(module)
    return module


figures = _load()

TEXT = """\
```
copied 206,325 characters into Acme Corp's notes: True
tool calling (every definition and result in context)      105,984 tokens
codemode (search + execute; data stays in the sandbox)       1,075 tokens
codemode used 99.0% fewer tokens
```

| | tool calling | codemode |
|---|---|---|
| seed scenario: copy a transcript | 105,984 tokens | 1,075 tokens (-99.0%) |
| filter 300 CRM leads down to five | 41,363 tokens | 877 tokens (-97.9%) |
| copy 20 contacts into a mailing list | 7,709 tokens | 732 tokens (-90.5%) |
"""


def run_of(first: int, second: int, third: int) -> dict:
    def of(baseline: int, codemode: int, chars: int | None = None):
        return figures.Figures(baseline, codemode, round(100 * (1 - codemode / baseline), 1), chars)

    return {
        "Task 1": of(105_984, first, 206_325),
        "Task 2": of(41_363, second),
        "Task 3": of(7_709, third),
    }


def test_stale_figures_are_named_and_rewritten_from_the_run():
    run = run_of(1_204, 916, 766)
    found = figures.problems(TEXT, run)
    assert "top: codemode 1,075 tokens, the demo 1,204" in found
    assert "Task 3: 90.5% fewer tokens, the demo 90.1%" in found
    fixed = figures.rewrite(TEXT, run)
    assert figures.problems(fixed, run) == []
    assert "codemode (search + execute; data stays in the sandbox)       1,204 tokens" in fixed
    assert "| 41,363 tokens | 916 tokens (-97.8%) |" in fixed


def test_run_to_run_jitter_of_a_few_tokens_is_not_a_difference():
    assert figures.problems(TEXT, run_of(1_080, 880, 735)) == []


def test_a_missing_figure_is_a_problem():
    assert "README: no figures found for Task 2" in figures.problems(
        TEXT.replace("| filter 300", "| sift 300"), run_of(1_075, 877, 732)
    )


@pytest.mark.slow
def test_the_readme_shows_what_the_demo_prints_now():
    from codemode.search.encoder import INSTALL_HINT, semantic_available

    if not semantic_available():
        # The README's figures are the default install's: its search answers (and so their
        # tokens) rank with the embedding model. make test's main run has it and checks them.
        pytest.skip(
            f"the README's demo figures are measured with the embedding model ({INSTALL_HINT})"
        )
    run = figures.demo_figures(figures.run_demo())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert figures.problems(readme, run) == [], "run `python scripts/readme_figures.py --write`"

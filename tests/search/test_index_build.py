"""``codemode index build``: the index built ahead, with stage and percentage on stderr, then
used by ``codemode search`` without loading the catalog again."""

from __future__ import annotations

import io
import json

import pytest

from codemode.cli import search_command
from codemode.cli.main import main
from codemode.search.progress import StageLines, overall_percent


@pytest.fixture(autouse=True)
def no_local_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no codemode.toml here: only --openapi specs count


def _no_engine(*args, **kwargs):
    raise AssertionError("the catalog was loaded again: the built index was not used")


def test_lexical_build_reports_stages_and_search_uses_it(tiny_spec_file, capsys, monkeypatch):
    assert main(["index", "build", "--openapi", str(tiny_spec_file), "--no-semantic"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("codemode: search index:")]
    assert lines == ["codemode: search index: lexical 0%", "codemode: search index: ready 100%"]
    assert out.startswith("search index ready: 5 tools, lexical only, in ")
    monkeypatch.setattr(search_command, "_search_through_engine", _no_engine)
    argv = ["search", "refund a charge", "--openapi", str(tiny_spec_file), "--no-semantic"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["tool"] == "refundCharge"


@pytest.mark.needs_model
def test_semantic_build_reports_embedding_percentages(tiny_spec_file, capsys, monkeypatch):
    assert main(["index", "build", "--openapi", str(tiny_spec_file), "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["tools"], summary["semantic"]) == (5, True)
    stages = [line.rsplit(" ", 2)[-2:] for line in err.splitlines() if "search index:" in line]
    assert stages[0] == ["lexical", "0%"]
    assert ["embedding", "100%"] in stages
    assert stages[-1] == ["ready", "100%"]
    monkeypatch.setattr(search_command, "_search_through_engine", _no_engine)
    assert main(["search", "give money back", "--openapi", str(tiny_spec_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_a_broken_server_fails_the_build(tmp_path, capsys):
    config = tmp_path / "codemode.toml"
    config.write_text('[servers.gone]\ncommand = "/nonexistent/server"\n')
    assert main(["index", "build", "--config", str(config), "--no-semantic"]) == 69
    assert "gone" in capsys.readouterr().err


def test_stage_lines_print_each_stage_and_every_tenth():
    stream = io.StringIO()
    lines = StageLines(stream)
    for stage, percent in [
        ("lexical", 0.0),
        ("embedding", 1.0),
        ("embedding", 5.0),
        ("embedding", 12.0),
        ("embedding", 100.0),
        ("ready", 100.0),
    ]:
        lines(stage, percent)
    assert stream.getvalue().splitlines() == [
        "codemode: search index: lexical 0%",
        "codemode: search index: embedding 1%",
        "codemode: search index: embedding 12%",
        "codemode: search index: embedding 100%",
        "codemode: search index: ready 100%",
    ]


def test_overall_percent_grows_across_stages():
    points = [
        ("starting", 0),
        ("lexical", 50),
        ("embedding", 0),
        ("embedding", 50),
        ("embedding", 100),
        ("ready", 100),
    ]
    values = [overall_percent(stage, percent) for stage, percent in points]
    assert values == sorted(values) and values[-1] == 100.0 and values[3] == 52.5

import argparse
import json

import pytest

from codemode.cli import search_command, tokens_command


def run(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no codemode.toml here: only --openapi specs count
    monkeypatch.setenv("CODEMODE_STATE_DIR", str(tmp_path / "state"))


def test_search_json_shape(tiny_spec_file, capsys):
    assert run(search_command, ["refund a charge", "--openapi", str(tiny_spec_file), "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    ours = [h for h in hits if h["server"] == "tiny_shop"]
    assert ours[0]["tool"] == "refundCharge"
    assert ours[0] == hits[0]
    for key in ("server", "tool", "score", "method", "path", "operation_id"):
        assert key in ours[0]
    assert (ours[0]["method"], ours[0]["path"]) == ("POST", "/charges/{id}/refund")
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_search_text_answer_and_limit(tiny_spec_file, capsys):
    argv = ["delete customer", "--openapi", str(tiny_spec_file), "--limit", "1", "--no-semantic"]
    assert run(search_command, [*argv, "--detail", "name"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "from servers import tiny_shop",
        "tiny_shop.delete_customer",
    ]


def test_tokens_json_has_every_source_and_total(tiny_spec_file, capsys):
    assert run(tokens_command, ["--openapi", str(tiny_spec_file), "--json"]) == 0
    ledger = json.loads(capsys.readouterr().out)
    assert {"tiny_shop", "total"} <= set(ledger)
    for row in ledger.values():
        for key in ("tools", "tool_definition_tokens", "surface_tokens", "search_answer_tokens"):
            assert isinstance(row[key], int)
    assert ledger["tiny_shop"]["tools"] == 5
    assert ledger["total"]["surface_tokens"] < 500

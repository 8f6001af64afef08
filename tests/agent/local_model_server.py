"""A real OpenAI-compatible model server on this machine, for the local-model test.

The server is llama.cpp's own HTTP server (its Chat Completions, chat templates, sampling and
usage counts), compiled into the prebuilt CPU wheel `xllamacpp` on PyPI: no source build. It
serves a GGUF file in a child process, so the test talks to it over HTTP on 127.0.0.1 like any
client would, and a crash in native code cannot take pytest down.

As a script, `python local_model_server.py --model GGUF --alias NAME --address-file PATH` loads
the model, listens on a free port the kernel picks (no probe-then-bind race), writes the base
URL to PATH once it accepts requests, and serves until its standard input closes: the parent
closing it, or the parent dying. `LocalModelServer` is that parent: a context manager that
starts the child, waits for the address with a bound, and stops it with bounded waits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

READY_TIMEOUT = 120.0  # loading takes ~2 s here; a loaded shared machine can be far slower
STOP_TIMEOUT = 10.0


class LocalModelServerError(RuntimeError):
    """The model server did not start; the message carries the tail of its log."""


class LocalModelServer:
    """A child process serving one GGUF model through llama.cpp's OpenAI-compatible server."""

    def __init__(self, model: Path, alias: str, workdir: Path, *, threads: int = 1) -> None:
        self.model = model
        self.alias = alias
        self.threads = threads
        self.log = workdir / "server.log"
        self.address_file = workdir / "address"
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def __enter__(self) -> LocalModelServer:
        command = [sys.executable, __file__, "--model", str(self.model), "--alias", self.alias]
        command += ["--threads", str(self.threads), "--address-file", str(self.address_file)]
        # One OpenMP thread as well: on a shared 2-core machine a spinning pool of two is many
        # times slower than one thread (measured with llama.cpp here: 1.5 against 25 tokens/s).
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads)}
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT, env=env
            )
        try:
            self.base_url = self._wait_for_address()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _wait_for_address(self) -> str:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.address_file.is_file():
                return self.address_file.read_text(encoding="utf-8").strip()
            try:  # a bounded wait on the other condition: the server dying
                self.process.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
            raise LocalModelServerError(f"the model server exited: {self.log_tail()}")
        raise LocalModelServerError(f"no model server after {READY_TIMEOUT} s: {self.log_tail()}")

    def stop(self) -> None:
        """Close the child's stdin (it exits cleanly on EOF); kill it if it does not."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)

    def log_tail(self, chars: int = 2000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def serve(model: Path, alias: str, threads: int, address_file: Path) -> None:
    import xllamacpp  # type: ignore[import-not-found,unused-ignore]

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {alias}  # the name /v1/models lists and responses carry
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, picked when the server binds
    params.n_ctx = 4096
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.ui = False
    params.endpoint_metrics = True  # GET /metrics: the tokens it processed
    params.verbosity = 0
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port bound
    partial = address_file.with_suffix(".partial")
    partial.write_text(str(server.listening_address), encoding="utf-8")
    partial.replace(address_file)  # atomic: the parent never reads half an address
    sys.stdin.buffer.read()  # serve until the parent closes our stdin (or dies)
    del server  # stops the HTTP server and frees the model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a GGUF file")
    parser.add_argument("--alias", required=True, help="the model name the server reports")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--address-file", type=Path, required=True)
    args = parser.parse_args()
    serve(args.model, args.alias, args.threads, args.address_file)


if __name__ == "__main__":
    main()

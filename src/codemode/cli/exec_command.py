"""``codemode exec``: run a file (or stdin) in a fresh sandbox, streaming its output.

The code's stdout goes to stdout and its stderr to stderr as it is written; the command exits
with the code's own status, or with codemode's codes for a timeout, a limit or no sandbox
(``codemode.cli.exit_codes``). ``--json`` prints the result as one JSON object instead, with
the whole stdout (up to ``--max-output`` bytes).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.cli.exit_codes import ExitCode
from codemode.cli.options import add_catalog_arguments
from codemode.cli.status_line import StatusLine
from codemode.terminal_text import for_terminal, text_for_terminal

if TYPE_CHECKING:
    from codemode.cli.web_approval import WebApprover
    from codemode.engine import Codemode
    from codemode.sandbox.result import ExecutionResult

__all__ = ["HELP", "OutputSink", "add_arguments", "run"]

HELP = "run Python code in a fresh sandbox, with the configured tools importable from `servers`"

DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
# How long Ctrl-C waits for the code and its sandbox to stop before the process just leaves.
INTERRUPT_GRACE_S = 5.0
# How often the status line on a terminal is redrawn while the code runs.
STATUS_INTERVAL_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from codemode.cli.exit_codes import describe

    parser.epilog = describe()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("file", metavar="FILE|-", help="the code to run; - reads stdin")
    add_catalog_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the result as JSON (with the whole stdout)"
    )
    parser.add_argument(
        "--max-output",
        type=int,
        default=DEFAULT_MAX_OUTPUT,
        metavar="BYTES",
        help=f"with --json, keep at most this much stdout (default {DEFAULT_MAX_OUTPUT:,})",
    )
    parser.add_argument("--timeout", type=float, metavar="S", help="wall-time limit in seconds")
    parser.add_argument(
        "--no-tools", action="store_true", help="do not connect any tool server (sandbox only)"
    )
    parser.add_argument(
        "--files",
        type=Path,
        metavar="DIR",
        help="copy the files the code made out of the sandbox into DIR (default: a folder "
        "named after the session in the state directory)",
    )
    parser.add_argument(
        "--approve",
        choices=("ask", "web", "all", "none"),
        default="ask",
        help="calls that need approval: ask on the terminal (default; denied without one; "
        "the answer may hold for the tool or server for the run), on a local approval page "
        "(web: prints its link and waits), approve all, or deny all",
    )


class OutputSink:
    """Where streamed output goes: the code's stderr to stderr at once; its stdout to stdout
    at once, or (``collect``) into a buffer of at most ``limit`` bytes for the JSON result."""

    def __init__(
        self, *, collect: bool, limit: int, before_write: Callable[[], None] | None = None
    ) -> None:
        self.collect = collect
        self.limit = limit
        self.before_write = before_write  # e.g. wipe the status line
        self.stdout = bytearray()
        self.stdout_total = 0
        self.stderr_total = 0
        self._closed: set[str] = set()
        self._terminals: dict[str, bool] = {}  # stream name -> it is a terminal

    def __call__(self, stream: str, data: bytes) -> None:
        if stream == "stderr":
            self.stderr_total += len(data)
        if stream == "stdout" and self.collect:
            self.stdout_total += len(data)
            self.stdout += data[: max(self.limit - len(self.stdout), 0)]
            return
        self._write(sys.stdout if stream == "stdout" else sys.stderr, stream, data)

    def _write(self, target: Any, name: str, data: bytes) -> None:
        if name in self._closed:
            return
        if self.before_write is not None:
            self.before_write()
        if self._is_terminal(name, target):
            data = for_terminal(data)
        try:
            raw = getattr(target, "buffer", None)
            if raw is not None:
                target.flush()
                raw.write(data)
                raw.flush()
            else:
                target.write(data.decode("utf-8", "replace"))
                target.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._closed.add(name)  # the reader went away (e.g. `| head`): stop writing there

    def _is_terminal(self, name: str, target: Any) -> bool:
        if name not in self._terminals:
            try:
                self._terminals[name] = bool(target.isatty())
            except (AttributeError, ValueError, OSError):
                self._terminals[name] = False
        return self._terminals[name]

    def stdout_text(self) -> str:
        text = self.stdout.decode("utf-8", "replace")
        dropped = self.stdout_total - len(self.stdout)
        if dropped:
            text += f"\n[... {dropped:,} more bytes not kept (--max-output {self.limit:,}) ...]"
        return text


def _read_code(name: str) -> str:
    from codemode.errors import UsageError

    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(
            f"cannot read {name}: {error}", fix="pass a readable UTF-8 file or -"
        ) from None


def _check(args: argparse.Namespace) -> None:
    from codemode.errors import UsageError

    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive", fix="e.g. --timeout 30")
    if args.max_output < 0:
        raise UsageError("--max-output must be 0 or more", fix="e.g. --max-output 1000000")


def _exit_unless_stopped(grace_s: float) -> None:
    """After Ctrl-C, leave within ``grace_s`` even if the code does not stop: the sandbox
    (started with --die-with-parent) and stdio servers end with this process."""
    import os
    import threading

    def leave() -> None:
        print("codemode: the code did not stop in time; exiting", file=sys.stderr, flush=True)
        os._exit(ExitCode.INTERRUPTED)

    timer = threading.Timer(grace_s, leave)
    timer.daemon = True
    timer.start()


async def _save(
    engine: Codemode, result: ExecutionResult, folder: Path | None
) -> dict[str, Path | str]:
    """The files the execution made, copied out before its sandbox goes away."""
    from codemode.files.export import changed_files, save_files

    paths = changed_files(result)
    sandboxes = engine.sandboxes
    if not paths or not result.session or sandboxes is None or not sandboxes.has_workspace:
        return {}
    destination = folder or engine.config.gateway.state_dir / "files" / result.session
    return await save_files(engine, result.session, paths, destination)


def execute(
    args: argparse.Namespace, code: str, sink: OutputSink, status: StatusLine | None = None
) -> ExecutionResult | None:
    """Run the code once in its own engine, answering approvals as ``--approve`` says; a
    ``status`` line shows how it is going meanwhile. None when Ctrl-C (or SIGTERM) stopped it."""
    import contextlib
    import signal

    import anyio
    import anyio.to_thread

    from codemode.cli.approval_prompt import decide
    from codemode.cli.options import check_loaded, load_cli_config
    from codemode.engine import Codemode
    from codemode.errors import CodemodeError
    from codemode.policy.approval import ApprovalDecision
    from codemode.policy.grants import ApprovalAnswer

    config = load_cli_config(args.config, demo_allowed=not (args.no_tools or args.openapi))
    openapi: list[Path] = [] if args.no_tools else args.openapi
    # One execution needs one sandbox: no warm pool.
    update: dict[str, object] = {"sandbox": config.sandbox.model_copy(update={"pool_size": 0})}
    if args.no_tools:
        update |= {"servers": {}, "server_problems": {}}
    if status is not None and status.enabled:  # redraw the status line every second
        interval = min(config.gateway.progress_interval_s, STATUS_INTERVAL_S)
        update["gateway"] = config.gateway.model_copy(update={"progress_interval_s": interval})
    config = config.model_copy(update=update)
    progress = status if status is not None and status.enabled else None
    finished: list[ExecutionResult] = []
    failed: list[CodemodeError] = []  # raised after the task group, which would wrap it

    async def run_code(engine: Codemode) -> None:
        async with contextlib.AsyncExitStack() as stack:
            web = None
            if args.approve == "web":
                from codemode.cli.web_approval import web_approver

                web = await stack.enter_async_context(web_approver(engine))
            await answer_approvals(engine, web)

    async def answer_approvals(engine: Codemode, web: WebApprover | None) -> None:
        try:
            result = await engine.execute(
                code, timeout_s=args.timeout, on_output=sink, progress=progress
            )
            while result.approval is not None:
                if status is not None:
                    status.clear()
                approval = result.approval
                if web is not None:
                    allow, remember = await web.decide(approval, result.session, result.stdout)
                    answer = ApprovalAnswer(allow, remember)
                else:
                    answer = await anyio.to_thread.run_sync(decide, args.approve, approval)
                decision = ApprovalDecision.answering(approval, answer)
                result = await engine.decide(decision, progress=progress)
            if status is not None:
                status.clear()
            saved = await _save(engine, result, args.files)
        except CodemodeError as error:
            failed.append(error)
            return
        if saved:
            saved_files = {
                path: str(where) if isinstance(where, Path) else f"not copied: {where}"
                for path, where in saved.items()
            }
            result = replace(result, saved_files=saved_files)
        finished.append(result)

    async def main() -> None:
        async with Codemode(config, openapi_specs=openapi, semantic=False) as engine:
            failures = {**config.server_problems, **engine.catalog.failures}
            check_loaded(failures, allow_partial=args.allow_partial)
            async with anyio.create_task_group() as group:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

                    async def stop_on_signal() -> None:
                        async for _ in signals:
                            print("codemode: interrupted; stopping the code", file=sys.stderr)
                            _exit_unless_stopped(INTERRUPT_GRACE_S)
                            group.cancel_scope.cancel()
                            return

                    group.start_soon(stop_on_signal)
                    await run_code(engine)
                    group.cancel_scope.cancel()

    anyio.run(main)
    if failed:
        raise failed[0]
    return finished[0] if finished else None


def run(args: argparse.Namespace) -> int:
    from codemode.cli.exit_codes import for_status

    _check(args)
    code = _read_code(args.file)
    status = StatusLine()
    sink = OutputSink(collect=args.json, limit=args.max_output, before_write=status.clear)
    try:
        result = execute(args, code, sink, status)
    finally:
        status.clear()
    if result is None:
        return ExitCode.INTERRUPTED
    if args.json:
        document = result.to_dict()
        document["stdout"] = sink.stdout_text()
        document["truncated"]["stdout_bytes"] = sink.stdout_total - len(sink.stdout)
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        _report(result, error_shown=sink.stderr_total > 0)
    return for_status(result.status, result.exit_code)


def _report(result: ExecutionResult, *, error_shown: bool) -> None:
    """After streamed output: what the output itself does not say, on stderr."""
    import logging

    saved = result.saved_files or {}
    if saved:
        print("codemode: files the code made:", file=sys.stderr)
        shown = text_for_terminal if sys.stderr.isatty() else str
        for path, where in saved.items():
            print(f"  {shown(path)} -> {shown(str(where))}", file=sys.stderr)

    if result.status in ("timeout", "limit"):
        what = "timed out" if result.status == "timeout" else f"hit the {result.limit} limit"
        print(f"codemode: the code {what}: {result.hint}", file=sys.stderr)
    elif result.error and not error_shown:
        # An error the code never printed, e.g. a call refused before anything ran.
        where = f"line {result.error['line']}: " if result.error.get("line") else ""
        print(
            f"codemode: {where}{result.error['type']}: {result.error['message']}",
            file=sys.stderr,
        )
    elif logging.getLogger().isEnabledFor(logging.INFO):
        calls = result.tool_calls.get("count", 0)
        print(
            f"codemode: {result.status} in {result.duration_ms:.0f} ms, {calls} tool calls",
            file=sys.stderr,
        )

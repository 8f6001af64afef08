"""``codemode run TASK``: the codemode agent does a task with a model, round by round.

Each round is shown live (the model's plan, its code, the result), then a ledger of rounds,
tokens and wall time. Progress (each model call started, still waiting, answered; tokens and
time so far) goes to stderr. ``--json`` prints the run record on stdout instead (status, rounds,
answer...) and the live view on stderr. Exit status: 0 done, 1 escalated or failed, 2 a usage
error (a missing API key, an unknown provider, a bad config), 130 interrupted by SIGINT or
SIGTERM (the ``--json`` record is still printed whole, with status ``interrupted``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codemode.terminal_text import text_for_terminal

if TYPE_CHECKING:
    from codemode.agent import Agent
    from codemode.agent.loop import Approval, Approver
    from codemode.agent.record import RunRecord
    from codemode.engine import Codemode

HELP = "do a task with the codemode agent: a model writes code, the sandbox runs it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="what to do, in words")
    parser.add_argument("--config", type=Path, help="codemode.toml or mcpServers JSON")
    parser.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="anthropic:NAME, openai:NAME (any OpenAI-compatible server: OPENAI_BASE_URL), "
        "scripted:FILE or replay:FILE (default: [agent] model in the config)",
    )
    parser.add_argument(
        "--max-rounds", type=int, metavar="N", help="model calls before escalating (default 8)"
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="the session's workspace: the code starts in DIR and the files it writes stay there",
    )
    parser.add_argument(
        "--format",
        choices=("tools", "json", "fenced"),
        help="how the model answers (default: [agent.models] in the config, else tools)",
    )
    parser.add_argument("--timeout", type=float, metavar="S", help="wall-time limit per execution")
    parser.add_argument(
        "--run-timeout",
        type=float,
        metavar="S",
        help="wall-time limit of the whole run: no model call or retry outlasts it "
        "(default: run_timeout_s in [agent], 900)",
    )
    parser.add_argument(
        "--approve",
        choices=("ask", "web", "all", "none"),
        default="ask",
        help="calls that need approval: ask on the terminal (default), on a local approval "
        "page (web: prints its link and waits), approve all, deny all",
    )
    parser.add_argument("--json", action="store_true", help="print the run record as JSON")


def _approver(mode: str) -> Approver:
    from codemode.cli.approval_prompt import decide
    from codemode.policy.grants import ApprovalAnswer

    def approve(approval: Approval) -> ApprovalAnswer:
        return decide(mode, approval)

    return approve


async def _tell_where_the_files_are(
    engine: Codemode, session: str | None, workspace: Path | None, out: TextIO
) -> None:
    """The files the run left: in ``--workspace`` already, else copied out of the sandbox
    (into ``<state_dir>/files/<session>``) before it goes away."""
    from codemode.errors import CodemodeError
    from codemode.files.export import save_workspace

    if workspace is not None:
        print(f"files: in {workspace}", file=out)
        return
    sandboxes = engine.sandboxes
    if session is None or sandboxes is None or not sandboxes.has_workspace:
        return
    destination = engine.config.gateway.state_dir / "files" / session
    try:
        saved = await save_workspace(engine, session, destination)
    except CodemodeError as error:
        print(f"files: not copied out of the sandbox ({error.message})", file=out)
        return
    if saved:
        print(f"files: copied out of the sandbox into {destination}", file=out)
        shown = text_for_terminal if out.isatty() else str
        for path, where in saved.items():
            print(
                f"  {shown(path)}"
                + ("" if isinstance(where, Path) else f": not copied: {shown(where)}"),
                file=out,
            )


async def _run_until_signalled(agent: Agent, task: str) -> RunRecord:
    """The run; SIGINT or SIGTERM interrupts it (status ``interrupted``, a whole record), and
    the process leaves within the grace time even if the sandbox does not stop."""
    import signal

    import anyio

    from codemode.cli.exec_command import INTERRUPT_GRACE_S, _exit_unless_stopped

    names = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
    records: list[RunRecord] = []
    async with anyio.create_task_group() as group:
        with anyio.open_signal_receiver(*names) as signals:

            async def interrupt_on_signal() -> None:
                async for number in signals:
                    name = names.get(signal.Signals(number), str(number))
                    print(f"codemode: {name}; stopping the run", file=sys.stderr, flush=True)
                    _exit_unless_stopped(INTERRUPT_GRACE_S)
                    agent.interrupt(f"interrupted by {name}")
                    return

            group.start_soon(interrupt_on_signal)
            records.append(await agent.run(task))
            group.cancel_scope.cancel()
    return records[0]


def run(args: argparse.Namespace) -> int:
    from contextlib import AsyncExitStack

    import anyio

    from codemode.agent import Agent, make_provider
    from codemode.agent.live import LivePrinter
    from codemode.cli.exit_codes import ExitCode
    from codemode.config import load_config
    from codemode.engine import Codemode
    from codemode.errors import UsageError
    from codemode.sandbox.backends import make_backend

    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive", fix="e.g. --timeout 30")
    if args.run_timeout is not None and args.run_timeout <= 0:
        raise UsageError("--run-timeout must be positive", fix="e.g. --run-timeout 600")
    if args.max_rounds is not None and args.max_rounds < 1:
        raise UsageError("--max-rounds must be at least 1", fix="e.g. --max-rounds 8")
    config = load_config(args.config)
    settings = config.agent
    ref = args.model or settings.model
    model_settings = settings.for_model(ref)
    model = make_provider(ref, model_settings)  # a missing key fails here, before any work
    workspace: Path | None = args.workspace
    if workspace is not None:
        workspace.mkdir(parents=True, exist_ok=True)
    # One session per run: one warm sandbox is all it needs.
    config = config.model_copy(
        update={"sandbox": config.sandbox.model_copy(update={"pool_size": 1})}
    )

    out = sys.stderr if args.json else sys.stdout

    async def main() -> RunRecord:
        backend = make_backend(config.sandbox, workspace=workspace) if workspace else None
        try:
            async with Codemode(config, backend=backend) as engine, AsyncExitStack() as stack:
                approve = _approver(args.approve)
                if args.approve == "web":
                    from codemode.cli.web_approval import web_approver

                    approve = await stack.enter_async_context(web_approver(engine))
                agent = Agent(
                    engine,
                    model,
                    output_format=args.format or model_settings.format,
                    max_rounds=args.max_rounds or settings.max_rounds,
                    approve=approve,
                    observer=LivePrinter(out, progress=sys.stderr),
                    execution_timeout_s=args.timeout or settings.execution_timeout_s,
                    context_tokens=model_settings.context_tokens,
                    max_tokens=model_settings.max_tokens,
                    keep_session=True,  # until its files are copied out
                    run_timeout_s=args.run_timeout or settings.run_timeout_s,
                )
                record = await _run_until_signalled(agent, args.task)
                await _tell_where_the_files_are(engine, record.session, workspace, out)
                if record.session is not None:
                    await engine.close_session(record.session)
                return record
        finally:
            await model.aclose()

    record = anyio.run(main)
    if args.json:
        print(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, default=str), flush=True)
    if record.status == "interrupted":
        return ExitCode.INTERRUPTED
    return 0 if record.status == "done" else 1

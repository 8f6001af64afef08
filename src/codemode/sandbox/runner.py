"""One sandbox seen from the host: run code in it, serve its bridge, hold it to its limits.

The execution loop is one thread multiplexing the bridge socket and the two output pipes, so
output written before the guest says "done" is always drained before the result is built.
The watchdog holds the sandbox to its limits meanwhile, and the loop to its wall time; both
kill the whole sandbox. Once an execution ends, every task of the sandbox is stopped until the
next one, or proven unable to run (``resting``): nothing of the code runs in between. The host
lists the workspace itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from codemode.bridge.frames import MalformedFrame, is_awaitable_call, is_done
from codemode.bridge.host import NO_TOOLS, BridgeHost, ToolAccess
from codemode.errors import SandboxError
from codemode.sandbox.affinity import CpuPinning
from codemode.sandbox.cancel import CANCEL_GRACE_S, check_cancel, interrupted_by_us
from codemode.sandbox.capture import HeadTail
from codemode.sandbox.facts import Parked
from codemode.sandbox.incoming import BridgeReader
from codemode.sandbox.module_watch import ModuleWatch
from codemode.sandbox.outcome import Measured, Outcome, build_result, settle
from codemode.sandbox.outgoing import send_frame
from codemode.sandbox.parallel import ParallelCalls
from codemode.sandbox.pipes import read_pipe
from codemode.sandbox.process import GuestProcess
from codemode.sandbox.result import ExecutionResult, clip_tail
from codemode.sandbox.spin import SpinBudget, spin_until_ready
from codemode.sandbox.watchdog import WATCHDOG, Watched
from codemode.sandbox.workspace import Snapshot, diff
from codemode.settings.sandbox import Limits

__all__ = ["CANCEL_GRACE_S", "OutputCallback", "Sandbox"]

log = logging.getLogger(__name__)

# Called with ("stdout" | "stderr", bytes) as the code writes, from the execution's thread.
OutputCallback = Callable[[str, bytes], None]

_F_SETPIPE_SZ = 1031
_WAKE_INTERVAL_S = 0.05
_PIPE_BYTES = 1 << 20  # each output pipe's depth
_PIN_AFTER_CALLS = 4
_NO_FILES: dict[str, list[str]] = {"created": [], "modified": [], "deleted": []}


class Sandbox:
    """A started guest. Not thread-safe: one execution at a time (sessions serialize)."""

    def __init__(self, process: GuestProcess, limits: Limits) -> None:
        self.process = process
        self.limits = limits
        self.bridge = BridgeReader(process.sock)
        self._pipe_count = bytearray(4)
        self.selector = selectors.DefaultSelector()
        self.executions = 0
        self.dead = False
        self.ready = False
        self._lock = threading.Lock()
        for fd in (process.stdout_fd, process.stderr_fd):
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
        process.sock.setblocking(False)
        self.selector.register(process.sock, selectors.EVENT_READ, "sock")
        self.selector.register(process.stdout_fd, selectors.EVENT_READ, "stdout")
        self.selector.register(process.stderr_fd, selectors.EVENT_READ, "stderr")
        # Workers answering awaitable calls wake the execution loop through this pair.
        self._waker, self._woken = socket.socketpair()
        for end in (self._waker, self._woken):
            end.setblocking(False)
        self.selector.register(self._woken, selectors.EVENT_READ, "wake")
        self._stdout = HeadTail(limits.output_kept_bytes)
        self._stderr = HeadTail(limits.output_kept_bytes)
        self._stopped = False
        # The workspace as the last execution left it (a new sandbox's is empty).
        self.files: Snapshot = {}
        self._pinning = CpuPinning()
        self._spin = SpinBudget()  # how long to look for an answer before sleeping
        self._live: tuple[BridgeHost, HeadTail] | None = None
        self._on_output: OutputCallback | None = None
        self._modules = ModuleWatch()  # the guest keeps the modules its code imported

    @property
    def guest_pid(self) -> int | None:
        """The guest interpreter's pid as the host sees it (pid 1 inside its namespace)."""
        return self.process.guest_pid

    @property
    def isolated(self) -> bool:
        return self.process.isolated

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the guest says it is ready, or raise SandboxError with bwrap's words."""
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise SandboxError(f"the sandbox did not start within {timeout_s:g} s")
            try:
                events = self.selector.select(remaining)
            except (OSError, ValueError) as error:  # closed under us: the pool was closed
                self.kill()
                raise SandboxError(
                    "the sandbox was stopped while it started",
                    fix="nothing to do when the gateway is shutting down; otherwise retry",
                ) from error
            for key, _ in events:
                if key.data == "sock":
                    # To the end: a guest that dies just after "ready" is a failed start.
                    for frame in self._read_frames(to_the_end=True):
                        if isinstance(frame, dict) and frame.get("op") == "ready":
                            self.ready = True
                else:
                    self._drain(key.data)
            if self.dead:
                message = self._exit_message()
                self.kill()
                raise SandboxError(
                    f"the sandbox exited while starting: {message}",
                    fix="run `codemode exec -` with `print(1)` to see the full error; check that "
                    "bubblewrap can create user namespaces here",
                )
        try:
            self.process.attach()
        except SandboxError:
            self.kill()
            raise
        if self.process.workspace is not None:
            # A host directory as workspace may hold files already: they were not "created".
            found = self.process.facts.list_workspace()
            self.files = found.snapshot if found is not None else {}
        self._stdout = HeadTail(self.limits.output_kept_bytes)
        self._stderr = HeadTail(self.limits.output_kept_bytes)

    def _exit_message(self) -> str:
        """What bwrap (or the guest) printed before exiting: wait for the exit, then read the
        pipe to its end, so the message is never lost to a race with the socket."""
        self.process.wait_exit(2)
        self._drain("stderr")
        head, tail, _ = self._stderr.text()
        return (head + tail).strip()[-500:] or "no message"

    def _read_frames(self, *, to_the_end: bool = False) -> list[dict[str, Any] | MalformedFrame]:
        frames = self.bridge.read(to_the_end=to_the_end)
        if self.bridge.ended:
            self.dead = True
        return frames

    def _took_output(self, which: object) -> bool:
        """Read the output pipe ``which`` if it is one (True), else leave it to the loop."""
        if which not in ("stdout", "stderr"):
            return False
        self._drain(str(which))
        return True

    def _drain(self, which: str, *, ready: bool = True) -> None:
        """Read what the pipe holds (``ready``: the selector said so; else maybe nothing)."""
        fd = self.process.stdout_fd if which == "stdout" else self.process.stderr_fd
        if fd < 0:
            return
        data = read_pipe(fd, self._pipe_count, ready=ready)
        if data is None:
            return
        if not data:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(fd)
            return
        (self._stdout if which == "stdout" else self._stderr).write(data)
        if self._on_output is not None:
            self._emit(which, data)

    def _emit(self, which: str, data: bytes) -> None:
        """Pass output on as it arrives; a failing callback is dropped, never the execution."""
        assert self._on_output is not None
        try:
            self._on_output(which, data)
        except Exception:
            log.exception("the output callback failed; output is no longer passed on")
            self._on_output = None

    def _send(
        self, frame: dict[str, Any], deadline: float, blocked: Callable[[], None] | None = None
    ) -> bool:
        """Send one frame, bounded by the deadline. False if the guest does not take it.
        ``blocked`` is called before waiting for the guest to read; meanwhile the output is
        drained, or a guest blocked on a full pipe could never read."""
        return send_frame(self.process.sock, frame, deadline, self._wait_writable, blocked)

    def _wait_writable(self, timeout: float) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.sock, selectors.EVENT_WRITE)
            for fd in (self.process.stdout_fd, self.process.stderr_fd):
                if fd >= 0:
                    sel.register(fd, selectors.EVENT_READ)
            for key, _ in sel.select(min(timeout, _WAKE_INTERVAL_S)):
                if key.fd == self.process.stdout_fd:
                    self._drain("stdout")
                elif key.fd == self.process.stderr_fd:
                    self._drain("stderr")

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        """Run ``code``; ``on_output(stream, data)`` sees its output as it is written. Setting
        ``cancel`` (from any thread) stops it: see ``_check_cancel``."""
        with self._lock:
            self._on_output = on_output
            try:
                return self._execute(code, tools, timeout_s, cancel)
            finally:
                self._live = None
                self._on_output = None
                self._pinning.unpin(self.guest_pid, guest_alive=not self.dead)

    def live_counts(self) -> tuple[int, int]:
        """(tool calls so far, bytes printed so far) of the running execution, for progress
        reports from another thread; (0, 0) between executions."""
        live = self._live
        if live is None:
            return 0, 0
        return live[0].stats.count, live[1].total

    def live_stdout(self) -> str:
        """The tail of what the running execution printed so far (as a result shows it);
        "" between executions. Read while the code waits on a tool call (an approval)."""
        live = self._live
        return clip_tail(live[1], self.limits.stdout_tail_chars)[0] if live is not None else ""

    def resume(self) -> None:
        """Let the sandbox's tasks run again (the next execution is about to start)."""
        if self._stopped:
            self.process.meter.resume()
            self._stopped = False

    def _execute(
        self,
        code: str,
        tools: ToolAccess,
        timeout_s: float | None,
        cancel: threading.Event | None = None,
    ) -> ExecutionResult:
        if self.dead:
            raise SandboxError("this sandbox has been stopped", fix="start a new session")
        limits = self.limits
        wall = timeout_s if timeout_s is not None else limits.wall_time_s
        started = time.monotonic()
        self.executions += 1
        self._stdout = HeadTail(limits.output_kept_bytes)
        self._stderr = HeadTail(limits.output_kept_bytes)
        host = BridgeHost(self.executions, tools, deadline=started + wall)
        self._live = (host, self._stdout)
        # Resumed in ``_serve``, once watched and once its code is on the way.
        watched = Watched(self.process.meter, limits)
        calls = ParallelCalls(host, self._wake, workers=limits.parallel_calls)
        WATCHDOG.watch(watched)
        try:
            outcome = self._serve(code, host, watched, calls, cancel)
        finally:
            WATCHDOG.unwatch(watched)
            host.close()
            calls.close()
        self._drain("stdout", ready=False)
        self._drain("stderr", ready=False)
        files, left_out, workspace_bytes = self._finish(outcome, watched)
        measured = Measured(
            stdout=self._stdout,
            stderr=self._stderr,
            tool_calls=host.stats.to_dict(),
            duration_ms=(time.monotonic() - started) * 1000,
            files=files,
            files_left_out=left_out,
            workspace_bytes=workspace_bytes,
            sandbox_reset=self.dead,
        )
        return build_result(outcome, measured, limits, wall)

    def _serve(
        self,
        code: str,
        host: BridgeHost,
        watched: Watched,
        calls: ParallelCalls,
        cancel: threading.Event | None = None,
    ) -> Outcome:
        """Send the code, answer the guest's requests, until "done", death, a breach, the
        wall time or the caller's cancel."""
        outcome = Outcome()
        stream = self._on_output is not None
        frame = {"op": "exec", "exec": host.execution, "code": code, "stream": stream}
        if self._modules.changed(host.modules):  # the catalog changed since the last one
            frame["modules_changed"] = True
        spin_s = self._spin.seconds_now()  # asked while the guest cannot run: see ``spin``
        # Sent while the guest is still stopped, so that its SIGCONT finds the frame waiting:
        # one wake-up of the guest instead of two. (Code larger than the socket's buffer
        # resumes it first, or the send would wait for a reader that cannot run.)
        if not self._send(frame, host.deadline, blocked=self.resume):
            if self.process.alive():
                outcome.status, outcome.limit = "timeout", "wall_time"
            else:  # ended while it waited between executions: none of this code ran
                outcome.died = True
                outcome.status, outcome.limit = "limit", "sandbox_gone"
        self.resume()
        sent_at = time.monotonic()
        if spin_s:
            # A warm execution answers within the spin; its output is read on the way.
            spin_until_ready(self.selector, spin_s, take=self._took_output)
        while outcome.done is None and outcome.status == "ok":
            if watched.breach is not None:
                break
            now = time.monotonic()
            deadline = host.deadline  # a tool call may extend it (time waiting for approval)
            if cancel is not None and self._check_cancel(cancel, outcome, now):
                break
            if now >= deadline:
                outcome.status, outcome.limit = "timeout", "wall_time"
                break
            ready = self.selector.select(min(deadline - now, _WAKE_INTERVAL_S))
            if len(ready) > 1:
                # The guest flushes its output before it sends a call, so the output is
                # ready by the time the call is: read it first, so that a call that waits (an
                # approval) shows what was printed before it.
                ready.sort(key=_bridge_last)
            for key, _ in ready:
                if key.data == "wake":
                    self._answer(calls, host, outcome)
                    continue
                if key.data != "sock":
                    self._drain(key.data)
                    continue
                frames = self._read_frames()
                for incoming in frames:
                    if outcome.cancelled_at is not None and not is_done(incoming):
                        outcome.refused_after_cancel += 1  # dropped: no call starts now
                        continue
                    awaitable = is_awaitable_call(incoming) and outcome.done is None
                    if awaitable and calls.submit(incoming):  # type: ignore[arg-type]
                        continue  # answered by a worker (else in turn: too many wait)
                    self._dispatch(incoming, host, outcome)
                if self.dead and outcome.done is None:  # set by the frame read above
                    outcome.died = True
                    outcome.status, outcome.limit = "limit", "sandbox_exit"
        if outcome.done is not None:
            self._spin.answered(time.monotonic() - sent_at)
        if outcome.died or outcome.status not in ("timeout", "cancelled"):
            # A limit passed just before "done" (the watchdog polls) is still a limit, and a
            # death may be the kernel's doing (a cgroup's OOM kill or its pids cap).
            watched.check()
        breach = watched.breach
        if breach is not None:
            outcome.status, outcome.limit = "limit", breach
        return outcome

    def _finish(
        self, outcome: Outcome, watched: Watched
    ) -> tuple[dict[str, list[str]], int, int | None]:
        """Decide the sandbox's fate; while it lives, stop it and list its workspace."""
        meter = self.process.meter
        settle(outcome, processes_hit=lambda: meter.usage().processes_hit)
        healthy = outcome.status in ("ok", "error") and not outcome.died
        # A reply the interrupted guest never read would be taken for the next one's, and an
        # interrupt the code did not receive would hit the guest between executions.
        if outcome.cancelled_at is not None and (
            self._unread_by_guest() > 0
            or (outcome.interrupted and not interrupted_by_us(outcome.done))
        ):
            healthy = False
        parked: Parked | None = None
        if healthy and self.process.isolated:
            parked = self.process.facts.park()
            if not parked.stopped:
                outcome.left_running = "processes that kept starting new ones"
            else:
                self._stopped = True
                if not parked.idle:
                    outcome.left_running = "code (it kept running after its own 'done')"
        if not healthy or outcome.left_running:
            self.kill()
            return dict(_NO_FILES), 0, None
        found = parked.files if parked is not None else self.process.facts.list_workspace()
        if found is None:
            return dict(_NO_FILES), 0, None
        files, left_out = diff(self.files, found.snapshot)
        self.files = found.snapshot
        # -1: the scan stopped at its caps, so some changes may be missing from the list.
        return files, -1 if found.capped else left_out, found.used_bytes

    # --- cancellation ---------------------------------------------------------------------

    def _check_cancel(self, cancel: threading.Event, outcome: Outcome, now: float) -> bool:
        """See ``codemode.sandbox.cancel.check_cancel``."""
        return check_cancel(
            self.process.facts,
            self.resume,
            cancel,
            outcome,
            now,
            pid=self.process.guest_pid,
            sent=self._sent_unread,
        )

    def _sent_unread(self) -> bool:
        """Has the guest sent something this side has not read yet (its "done", perhaps)?"""
        return any(key.data == "sock" for key, _ in self.selector.select(0))

    def _unread_by_guest(self) -> int:
        return self.process.facts.unread_bytes()

    def _dispatch(
        self, incoming: dict[str, Any] | MalformedFrame, host: BridgeHost, outcome: Outcome
    ) -> None:
        if isinstance(incoming, MalformedFrame):
            reply: dict[str, Any] = {
                "op": "reply",
                "id": None,
                "ok": False,
                "error": {"code": "bad_frame", "message": incoming.reason},
            }
        elif incoming.get("op") == "done":
            if incoming.get("exec") == host.execution and outcome.done is None:
                outcome.done = incoming
                return
            reply = {
                "op": "reply",
                "id": incoming.get("id") if isinstance(incoming.get("id"), int) else None,
                "ok": False,
                "error": {"code": "late_frame", "message": "no such execution is running"},
            }
        else:
            reply = host.handle(incoming)
            if host.stats.count == _PIN_AFTER_CALLS:
                self._pinning.pin(self.guest_pid)
        if not self._send(reply, host.deadline):
            outcome.status, outcome.limit = "timeout", "wall_time"

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is already waiting
            self._waker.send(b"\0")

    def _answer(self, calls: ParallelCalls, host: BridgeHost, outcome: Outcome) -> None:
        """Send the replies of the awaitable calls that have finished."""
        with contextlib.suppress(OSError):
            while self._woken.recv(4096):
                pass
        for reply in calls.replies():
            if outcome.done is None and not self._send(reply, host.deadline):
                outcome.status, outcome.limit = "timeout", "wall_time"

    def kill(self) -> None:
        if not self.dead or self.process.alive() or self.process.meter.kernel_enforced:
            self.dead = True
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.close()
            self._waker.close()
            self._woken.close()
            self.process.kill()
        self.dead = True

    close = kill


def _bridge_last(item: tuple[selectors.SelectorKey, int]) -> bool:
    return bool(item[0].data == "sock")

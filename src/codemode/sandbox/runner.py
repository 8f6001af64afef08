"""One sandbox seen from the host: run code in it, serve its bridge, watch its limits.

The execution loop is one thread multiplexing the bridge socket and the two output pipes, so
output written before the guest says "done" is always drained before the result is built.
Timeouts and limits are enforced from outside: the whole sandbox is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemode.bridge.frames import FrameDecoder, MalformedFrame, encode_frame
from codemode.bridge.host import NO_TOOLS, BridgeHost, ToolAccess
from codemode.errors import SandboxError
from codemode.sandbox.backends import WORKSPACE, SandboxProcess, children_of
from codemode.sandbox.capture import HeadTail
from codemode.sandbox.result import ExecutionResult, clip_head_tail, clip_tail, make_hint
from codemode.sandbox.settings import Limits

__all__ = ["OutputCallback", "Sandbox"]

log = logging.getLogger(__name__)

# Called with ("stdout" | "stderr", bytes) as the code writes, from the execution's thread.
OutputCallback = Callable[[str, bytes], None]

_F_SETPIPE_SZ = 1031
_WATCH_INTERVAL_S = 0.05
_READ_CHUNK = 1 << 20


@dataclass
class _Outcome:
    done: dict[str, Any] | None = None
    status: str = "ok"
    limit: str | None = None
    died: bool = False
    # Set when code was left running after "done" (threads, or a forged "done").
    left_running: str | None = None


_PIN_AFTER_CALLS = 4
# CPU the guest may use between executions (it only waits for the next frame).
_IDLE_CPU_ALLOWANCE_S = 0.05


class Sandbox:
    """A started guest. Not thread-safe: one execution at a time (sessions serialize)."""

    def __init__(self, process: SandboxProcess, limits: Limits) -> None:
        self.process = process
        self.limits = limits
        self.decoder = FrameDecoder()
        self.selector = selectors.DefaultSelector()
        self.executions = 0
        self.dead = False
        self.ready = False
        self.guest_pid: int | None = None
        self._lock = threading.Lock()
        for fd in (process.stdout_fd, process.stderr_fd):
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _READ_CHUNK)
        process.sock.setblocking(False)
        self.selector.register(process.sock, selectors.EVENT_READ, "sock")
        self.selector.register(process.stdout_fd, selectors.EVENT_READ, "stdout")
        self.selector.register(process.stderr_fd, selectors.EVENT_READ, "stderr")
        self._stdout = HeadTail(limits.output_kept_bytes)
        self._stderr = HeadTail(limits.output_kept_bytes)
        self._idle_cpu: float | None = None
        self._frozen = False
        self._pinned_from: set[int] | None = None
        self._guest_pinned_from: set[int] | None = None
        self._guest_pid_on_host: int | None = None
        self._on_output: OutputCallback | None = None

    def guest_pid_on_host(self) -> int | None:
        """The guest interpreter's pid as the host sees it (bwrap's child; pid 1 inside)."""
        if self._guest_pid_on_host is None:
            children = children_of(self.process.pid)
            self._guest_pid_on_host = children[0] if children else None
        return self._guest_pid_on_host

    def guest_threads(self) -> int:
        """OS threads of the guest, counted from the host (the guest cannot lie about it)."""
        pid = self.guest_pid_on_host()
        if pid is None:
            return 1
        try:
            return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            return 1

    def ran_while_idle(self) -> bool:
        """True when code is still running in the sandbox although its last execution ended
        (a busy thread, or code that forged "done"). An honest guest sleeps, waiting for the
        next frame, and uses no CPU between executions."""
        if self._idle_cpu is None or self.dead:
            return False
        if self.process.cpu_seconds() - self._idle_cpu > _IDLE_CPU_ALLOWANCE_S:
            return True
        return self._still_running()

    def _still_running(self) -> bool:
        """Is the guest's main thread busy although it said "done"? An honest guest blocks in
        recv at once; code that forged "done" keeps the CPU."""
        if self._guest_state() != "R":
            return False
        start = self.process.cpu_seconds()
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:
            if self._guest_state() != "R":
                return False
            time.sleep(0.002)
        return self.process.cpu_seconds() - start > 0.01

    def _guest_state(self) -> str:
        pid = self.guest_pid_on_host()
        if pid is None:
            return "?"
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "?"

    def workspace_inodes(self) -> int:
        pid = self.guest_pid_on_host()
        if pid is None:
            return 0
        try:
            st = os.statvfs(f"/proc/{pid}/root{WORKSPACE}")
        except OSError:
            return 0
        return st.f_files - st.f_ffree

    def is_dead(self) -> bool:
        """Read fresh: a frame read or a kill on this thread may have changed it."""
        return self.dead

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
            for key, _ in self.selector.select(remaining):
                if key.data == "sock":
                    for frame in self._read_frames():
                        if isinstance(frame, dict) and frame.get("op") == "ready":
                            self.ready = True
                            pid = frame.get("pid")
                            self.guest_pid = pid if isinstance(pid, int) else None
                else:
                    self._drain(key.data)
            if self.dead:
                _, text, _ = self._stderr.text()
                raise SandboxError(
                    f"the sandbox exited while starting: {text.strip()[-500:] or 'no message'}",
                    fix="run `codemode exec -` with `print(1)` to see the full error; check that "
                    "bubblewrap can create user namespaces here",
                )
        self._stdout = HeadTail(self.limits.output_kept_bytes)
        self._stderr = HeadTail(self.limits.output_kept_bytes)

    def _read_frames(self) -> list[dict[str, Any] | MalformedFrame]:
        frames: list[dict[str, Any] | MalformedFrame] = []
        while True:
            try:
                data = self.process.sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return frames
            except OSError:
                data = b""
            if not data:
                self.dead = True
                return frames
            frames += self.decoder.feed(data)

    def _drain(self, which: str) -> None:
        fd = self.process.stdout_fd if which == "stdout" else self.process.stderr_fd
        sink = self._stdout if which == "stdout" else self._stderr
        if fd < 0:
            return
        while True:
            try:
                data = os.read(fd, _READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(fd)
                return
            sink.write(data)
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

    def _send(self, frame: dict[str, Any], deadline: float) -> bool:
        """Send one frame, bounded by the deadline. False if the guest does not take it."""
        data = memoryview(encode_frame(frame))
        sock = self.process.sock
        while data:
            try:
                sent = sock.send(data)
                data = data[sent:]
            except (BlockingIOError, InterruptedError):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # Keep draining output while the guest is slow to read, or it may deadlock.
                self._wait_writable(remaining)
            except OSError:
                return False
        return True

    def _wait_writable(self, timeout: float) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.sock, selectors.EVENT_WRITE)
            for fd in (self.process.stdout_fd, self.process.stderr_fd):
                if fd >= 0:
                    sel.register(fd, selectors.EVENT_READ)
            for key, _ in sel.select(min(timeout, _WATCH_INTERVAL_S)):
                if key.fd == self.process.stdout_fd:
                    self._drain("stdout")
                elif key.fd == self.process.stderr_fd:
                    self._drain("stderr")

    def execute(
        self,
        code: str,
        *,
        tools: ToolAccess = NO_TOOLS,
        fresh: bool = False,
        timeout_s: float | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``code``; ``on_output(stream, data)`` sees its output as it is written."""
        with self._lock:
            self._on_output = on_output
            try:
                return self._execute(code, tools, fresh, timeout_s)
            finally:
                self._on_output = None
                self._unpin()

    def _pin_near_the_guest(self) -> None:
        """Serve a chatty execution from the guest's CPU: a tool call's round trip between two
        cores costs about twice as much as on one. Only after a few calls, because a quiet
        execution does not need it and large transfers gain from two cores."""
        pid = self.guest_pid_on_host()
        if pid is None or self._pinned_from is not None or not hasattr(os, "sched_setaffinity"):
            return
        try:
            cpu = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[36])
            allowed = os.sched_getaffinity(0)
            guest_allowed = os.sched_getaffinity(pid)
            if cpu in allowed and cpu in guest_allowed and len(allowed) > 1:
                # Both sides, or the load balancer moves the guest to the idle core.
                os.sched_setaffinity(0, {cpu})
                os.sched_setaffinity(pid, {cpu})
                self._pinned_from = allowed
                self._guest_pinned_from = guest_allowed
        except (OSError, ValueError, IndexError):
            return

    def _unpin(self) -> None:
        if self._pinned_from is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self._pinned_from)
            pid = self.guest_pid_on_host()
            if pid is not None and self._guest_pinned_from and not self.dead:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(pid, self._guest_pinned_from)
            self._pinned_from = None

    def _execute(
        self,
        code: str,
        tools: ToolAccess,
        fresh: bool,
        timeout_s: float | None,
    ) -> ExecutionResult:
        if self.dead:
            raise SandboxError("this sandbox has been stopped", fix="start a new session")
        limits = self.limits
        wall = timeout_s if timeout_s is not None else limits.wall_time_s
        started = time.monotonic()
        deadline = started + wall
        self.executions += 1
        execution = self.executions
        self._stdout = HeadTail(limits.output_kept_bytes)
        self._stderr = HeadTail(limits.output_kept_bytes)
        host = BridgeHost(execution, tools, deadline=deadline)
        if self._frozen and self.process.cgroup is not None:
            self.process.cgroup.thaw()
            self._frozen = False
        cpu_start = self.process.cpu_seconds()
        outcome = _Outcome()
        stream = self._on_output is not None
        frame = {"op": "exec", "exec": execution, "code": code, "fresh": fresh, "stream": stream}
        if not self._send(frame, deadline):
            outcome.status, outcome.limit = "timeout", "wall_time"
        next_watch = started + _WATCH_INTERVAL_S
        while outcome.done is None and outcome.status == "ok":
            now = time.monotonic()
            deadline = host.deadline  # a tool call may extend it (time waiting for approval)
            if now >= deadline:
                outcome.status, outcome.limit = "timeout", "wall_time"
                break
            if now >= next_watch:
                next_watch = now + _WATCH_INTERVAL_S
                if self._limit_broken(outcome, cpu_start):
                    break
            events = self.selector.select(min(deadline, next_watch) - now)
            for key, _ in events:
                if key.data != "sock":
                    self._drain(key.data)
                    continue
                for incoming in self._read_frames():
                    self._dispatch(incoming, host, outcome, deadline)
                if self.is_dead() and outcome.done is None:
                    outcome.died = True
                    self._classify_death(outcome)
        if outcome.status == "ok" and not outcome.died:
            # A limit hit just before "done" (the watcher polls every 50 ms) is still a limit.
            self._limit_broken(outcome, cpu_start)
        host.close()
        self._drain("stdout")
        self._drain("stderr")
        cgroup = self.process.cgroup
        healthy = outcome.status == "ok" and not outcome.died and self.process.isolated
        threads = self.guest_threads() if healthy else 1
        if healthy and self._still_running():
            outcome.left_running = "code (it sent its own 'done')"
        elif threads > 1 and not (cgroup is not None and cgroup.can_freeze):
            outcome.left_running = f"{threads - 1} thread(s)"
        if outcome.status != "ok" or outcome.died or outcome.left_running:
            self.kill()
        else:
            self._idle_cpu = self.process.cpu_seconds()
            if threads > 1 and cgroup is not None:
                # Threads left behind cannot run until the next execution. A lone guest
                # thread blocked in recv runs nothing, so the common case skips this.
                cgroup.freeze()
                self._frozen = True
        return self._result(outcome, host, started, wall)

    def _dispatch(
        self,
        incoming: dict[str, Any] | MalformedFrame,
        host: BridgeHost,
        outcome: _Outcome,
        deadline: float,
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
                self._pin_near_the_guest()
        if not self._send(reply, host.deadline):
            outcome.status, outcome.limit = "timeout", "wall_time"

    def _limit_broken(self, outcome: _Outcome, cpu_start: float) -> bool:
        cgroup = self.process.cgroup
        if cgroup is not None:
            if cgroup.pids_limit_hit():
                outcome.status, outcome.limit = "limit", "processes"
                return True
            if cgroup.memory_limit_hit():
                outcome.status, outcome.limit = "limit", "memory"
                return True
        if self.process.cpu_seconds() - cpu_start > self.limits.cpu_time_s:
            outcome.status, outcome.limit = "limit", "cpu_time"
            return True
        if self.process.isolated and self.workspace_inodes() > self.limits.workspace_inodes:
            outcome.status, outcome.limit = "limit", "workspace_inodes"
            return True
        return False

    def _classify_death(self, outcome: _Outcome) -> None:
        cgroup = self.process.cgroup
        if cgroup is not None and cgroup.memory_limit_hit():
            outcome.status, outcome.limit = "limit", "memory"
        elif cgroup is not None and cgroup.pids_limit_hit():
            outcome.status, outcome.limit = "limit", "processes"
        else:
            outcome.status, outcome.limit = "limit", "sandbox_exit"

    def _result(
        self, outcome: _Outcome, host: BridgeHost, started: float, wall: float
    ) -> ExecutionResult:
        limits = self.limits
        done = outcome.done or {}
        error = done.get("error") if isinstance(done.get("error"), dict) else None
        status = outcome.status
        limit = outcome.limit
        if status == "ok":
            exhausted = _exhaustion(error)
            if exhausted is not None:
                cgroup = self.process.cgroup
                pids_hit = cgroup is not None and cgroup.pids_limit_hit()
                status, limit = "limit", "processes" if pids_hit else exhausted
            elif error is not None or done.get("exit_code", 0) != 0:
                status = "error"
        if status == "limit" and limit == "memory" and not self.dead:
            self.kill()  # the namespace may still hold the memory; start clean
        stdout, stdout_cut = clip_tail(self._stdout, limits.stdout_tail_chars)
        stderr, stderr_cut = clip_head_tail(
            self._stderr, limits.stderr_head_chars, limits.stderr_tail_chars
        )
        files_raw: dict[str, Any] = done["files"] if isinstance(done.get("files"), dict) else {}
        files = {
            # The guest's frame is untrusted: a forged "done" may put anything here.
            key: [p for p in _as_list(files_raw.get(key)) if isinstance(p, str)][:200]
            for key in ("created", "modified", "deleted")
        }
        exit_code = done.get("exit_code") if isinstance(done.get("exit_code"), int) else None
        result = ExecutionResult(
            status=status,  # type: ignore[arg-type]
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            error=_clean_error(error),
            files=files,
            tool_calls=host.stats.to_dict(),
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            truncated={
                "stdout_bytes": stdout_cut,
                "stderr_bytes": stderr_cut,
                "stdout_total_bytes": self._stdout.total,
                "stderr_total_bytes": self._stderr.total,
            },
            hint="",
            limit=limit,
            sandbox_reset=self.dead,
        )
        workspace = done.get("workspace")
        if isinstance(workspace, dict):
            result.extra["workspace_bytes"] = workspace.get("used")
        result.hint = make_hint(result, wall)
        if outcome.left_running:
            result.extra["left_running"] = outcome.left_running
            result.hint = (
                f"{outcome.left_running} still ran when the code ended, so the sandbox was "
                "restarted (variables and files are gone). Join threads before the code ends."
            )
        return result

    def kill(self) -> None:
        if not self.dead or self.process.alive() or self.process.cgroup is not None:
            self.dead = True
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.close()
            self.process.kill()
        self.dead = True

    close = kill


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _exhaustion(error: dict[str, Any] | None) -> str | None:
    """The limit behind an error the code saw when the sandbox ran out of something."""
    if error is None:
        return None
    kind, message = error.get("type"), str(error.get("message", ""))
    if kind == "MemoryError" or (kind == "OSError" and "Cannot allocate memory" in message):
        return "memory"
    if kind == "RuntimeError" and "can't start new thread" in message:
        return "memory"
    return None


def _clean_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if error is None:
        return None
    line = error.get("line")
    return {
        "type": str(error.get("type", "Error"))[:100],
        "message": str(error.get("message", ""))[:2000],
        "line": line if isinstance(line, int) else None,
        "traceback": str(error.get("traceback", ""))[:4000],
        **({"tool": str(error["tool"])} if error.get("tool") else {}),
    }

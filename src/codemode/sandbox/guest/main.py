"""The guest: the sandbox's interpreter loop. Standard library only.

It waits for ``exec`` frames, runs the code in a persistent namespace (like a notebook), and
answers with a ``done`` frame: the exit code and the error with the line in the agent's code.
stdout and stderr go straight to pipes the host drains and caps; the host lists the workspace's
files itself. The guest never decides what the model sees: code can forge any frame.
"""

# The C modules under signal and socket: their Python layers (enum, selectors...) would cost
# every idle sandbox about 2 MiB of private memory; code that wants them imports them itself.
import _signal
import _socket
import os
import sys

from . import quiet, runtime, wire

CODE_FILENAME = "<code>"
# ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, without importing ast (it costs milliseconds at start-up).
_TOP_LEVEL_AWAIT = 0x2000


def _parse_args(argv):
    fd, paths, workspace, isolated = None, [], None, False
    egress_socket = None
    it = iter(argv)
    for arg in it:
        if arg == "--fd":
            fd = int(next(it))
        elif arg == "--path":
            paths.append(next(it))
        elif arg == "--workspace":
            workspace = next(it)
        elif arg == "--isolated":
            isolated = True
        elif arg == "--egress":
            egress_socket = next(it)
        elif arg == "--env":
            key, _, value = next(it).partition("=")
            os.environ[key] = value
    return fd, paths, workspace, isolated, egress_socket


def _utf8(text):
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe(error, code_lines):
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == CODE_FILENAME]
    line = frames[-1].lineno if frames else None
    if isinstance(error, SyntaxError) and error.filename == CODE_FILENAME:
        line = error.lineno
    lines = ["Traceback (agent code only):"]
    for frame in frames[-8:]:
        where = f"  line {frame.lineno}" + (
            f", in {frame.name}" if frame.name != "<module>" else ""
        )
        lines.append(where)
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if isinstance(error, SyntaxError) and error.lineno and 0 < error.lineno <= len(code_lines):
        lines.append(f"  line {error.lineno}")
        lines.append(f"    {code_lines[error.lineno - 1].strip()}")
    message = str(error) if not isinstance(error, SyntaxError) else (error.msg or str(error))
    lines.append(f"{type(error).__name__}: {message}")
    # Valid UTF-8 only: a lone surrogate would make the whole "done" frame undecodable.
    described = {
        "type": _utf8(type(error).__name__),
        "message": _utf8(message[:4000]),
        "line": line,
        "traceback": _utf8("\n".join(lines)[-4000:]),
    }
    if isinstance(error, runtime.ToolError):
        described["tool"] = _utf8(error.tool) if isinstance(error.tool, str) else error.tool
    return described


def _reap_strays(init):
    """End every process the code started; they must not outlive the execution. ``init``:
    the guest is pid 1 of its namespace."""
    if init:
        # Pid 1 of the namespace is every orphan's parent: no child means no other process.
        # (kill(-1) walks every process of the machine, the costliest step of a warm run.)
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            pass
    try:
        os.kill(-1, _signal.SIGKILL)
    except OSError:
        pass
    # Block: SIGKILLed children take a moment to die, and WNOHANG would leave them as zombies
    # (each still holding a pid of the limit). The host's deadline bounds this wait.
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


class Guest:
    def __init__(self, sock, workspace, isolated):
        self.sock = sock
        self.workspace = workspace
        self.isolated = isolated
        self.init = os.getpid() == 1  # asked once: getpid is a system call
        # ToolError is predefined: the execute tool's description promises it. A fresh
        # namespace (fresh=True) is a new guest process: the host starts one.
        self.namespace = {
            "__name__": "__main__",
            "__builtins__": __builtins__,
            "ToolError": runtime.ToolError,
            "packages": runtime.packages,
        }

    def run(self, frame):
        code = frame.get("code", "")
        runtime.bridge.reset(frame["exec"])
        if frame.get("modules_changed"):
            runtime.forget_host_modules()
        # A host that streams output gets each line as it is printed, as on a terminal;
        # otherwise an 8 KiB buffer saves a write per line (5x faster for print loops).
        try:
            sys.stdout.reconfigure(line_buffering=bool(frame.get("stream")))
        except Exception:
            pass
        exit_code, error = 0, None
        code = _pip_lines(code)
        code_lines = code.splitlines()
        try:
            compiled = compile(
                code, CODE_FILENAME, "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True
            )
            import linecache

            linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(True), CODE_FILENAME)
            runtime.executed.append(code)
            del runtime.executed[:-32]
            result = eval(compiled, self.namespace)
            if result is not None and hasattr(result, "__await__"):
                import asyncio

                asyncio.run(_await(result))
        except SystemExit as stop:
            exit_code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if stop.code is not None and not isinstance(stop.code, int):
                print(stop.code, file=sys.stderr)
        except BaseException as caught:
            exit_code = 1
            error = _describe(caught, code_lines)
            print(error["traceback"], file=sys.stderr)
            caught = None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if self.isolated:
            _reap_strays(self.init)
        return {"op": "done", "exec": frame["exec"], "exit_code": exit_code, "error": error}


def _warm_up(guest):
    """An empty execution before the guest says it is ready. A guest forked from the template
    shares the interpreter's pages but maps each one again on its first touch: about 40
    faults, 0.15 ms of CPU, once the template made the compiler's state (``prime_compiler``),
    which a session's first execution paid (a pooled guest pays them before any session
    takes it). It leaves nothing behind: no output, no code kept."""
    reply = guest.run({"op": "exec", "exec": 0, "code": "pass"})
    wire.encode_frame(reply)
    del runtime.executed[:]
    import linecache

    linecache.cache.pop(CODE_FILENAME, None)


def prime_compiler():
    """Compile and run an empty program as an execution would. The first ``compile`` in a
    process builds the compiler's state (the AST's hundred-odd types among it): done here
    in a template, every fork shares it; done in each fork, it took half of a sandbox's
    start (1.6 of 3.4 ms of the guest's CPU, and its pages private to each sandbox)."""
    eval(compile("pass", CODE_FILENAME, "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True), {})


def _pip_lines(code):
    """``pip install x y`` (also ``%pip``, ``!pip``, ``python -m pip``) lines, never valid
    Python, become ``packages.install(["x", "y"])``: the host installs, never the sandbox."""
    if "pip" not in code:
        return code
    import re

    def install(match):
        names = [word for word in match.group(2).split() if not word.startswith("-")]
        return f"{match.group(1)}packages.install({names!r})"

    pattern = r"(?m)^([ \t]*)[%!]?(?:python3?\s+-m\s+)?pip3?\s+install\s+(.*?)\s*$"
    return re.sub(pattern, install, code)


async def _await(awaitable):
    return await awaitable


def main(argv):
    fd, workspace, isolated = prepare(argv)
    serve(fd, workspace, isolated)


def prepare(argv):
    """Everything before the bridge: the environment, the way out, the site directories.
    A template (``template.py``) runs this once for every sandbox it forks."""
    fd, paths, workspace, isolated, egress_socket = _parse_args(argv)
    if egress_socket is not None:  # [sandbox.network] allow: the way out through the proxy
        from . import egress

        egress.install(egress_socket)
    os.chdir(workspace)
    import site

    site.sethelper()  # help() and exit(), which -S leaves out
    site.setquit()
    for path in paths:
        site.addsitedir(path)
    wire.use_native()  # the host's C MessagePack, where the site directories hold it
    # The code's own modules in the workspace import like a script's neighbours do.
    sys.path.insert(1, workspace)
    return fd, workspace, isolated


def serve(fd, workspace, isolated):
    """Answer frames on the bridge ``fd`` until the host says ``exit`` or goes away."""
    # Drop every descriptor we did not ask for (bwrap's, or anything inherited by mistake).
    os.closerange(3, fd)
    os.closerange(fd + 1, 4096)
    sock = _socket.socket(fileno=fd)
    runtime.install(sock)
    quiet.watch_threads()
    guest = Guest(sock, workspace, isolated)
    _warm_up(guest)
    reply = {"op": "ready", "pid": os.getpid()}
    while True:
        try:
            frame = _answer_and_wait(sock, reply)
        except EOFError:
            return
        op = frame.get("op")
        if op == "exec":
            reply = guest.run(frame)
        elif op == "ping":
            reply = {"op": "pong"}
        elif op == "exit":
            return
        else:
            reply = None  # not ours to answer: wait for the next frame


def _answer_and_wait(sock, reply):
    """Send ``reply`` (None: nothing) and wait for the next frame, every signal blocked for
    the wait and the code's own mask back once the frame came. A guest alone that waits so
    provably cannot run, and the host need not stop it (``codemode.sandbox.resting``). A
    signal that comes meanwhile (a timer of the code) is handled as the next execution
    begins, as in a sandbox stopped and then resumed."""
    with runtime.bridge.lock:  # a thread of the code may be sending a call
        mask = quiet.block()
        if reply is not None:
            sock.sendall(wire.encode_frame(reply))
    try:
        return runtime.bridge.read_frame()
    finally:
        quiet.restore(mask)

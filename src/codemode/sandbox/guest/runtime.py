"""``servers._runtime`` inside the sandbox: tool calls and module imports over the bridge.

Standard library only. The host decides everything: which tools this execution may call, what
they return, and the source of every ``servers.*`` module.
"""

# C modules, not socket and threading, and functools and linecache imported where used: an
# idle sandbox holds only what it needs (see main.py).
import _socket
import _thread
import contextvars
import importlib.machinery
import select
import sys
import types

from . import wire

__all__ = ["PackageError", "ToolError", "awaitable", "call_tool", "packages"]


class ToolError(Exception):
    """A tool call failed. ``str(error)`` is the upstream's message; catch it like any error."""

    def __init__(self, message, *, tool=None, code=None):
        super().__init__(message)
        self.tool = tool
        self.code = code


class _Bridge:
    """The guest's end of the bridge. Synchronous calls send and wait under the lock; awaitable
    ones send under it and return an asyncio future that the reply, matched by id, settles.
    Whoever reads the socket (a waiting synchronous call, or the event loop when it is readable)
    hands each reply to its owner, so calls of either kind may be in flight together."""

    def __init__(self):
        self.sock = None
        self.lock = _thread.allocate_lock()
        self.execution = 0
        self.next_id = 0
        self.buffer = bytearray()
        self.pending = {}  # request id -> asyncio future of an awaitable call
        self.loop = None  # the event loop watching the socket while awaitable calls are out
        self.poller = None  # waits for the socket to be readable (``install``)

    def reset(self, execution):
        """A new execution: replies to the last one's unawaited calls are dropped when read."""
        with self.lock:
            self.execution = execution
            self.pending.clear()
            self._unwatch()

    def _send(self, frame):
        self.next_id += 1
        frame["id"] = self.next_id
        frame["exec"] = self.execution
        wire.send_frame(self.sock, frame)
        return self.next_id

    def request(self, frame):
        with self.lock:
            request_id = self._send(frame)
            while True:
                reply = self._next_frame()
                if reply.get("id") == request_id:
                    return reply
                if self._settle(reply) or _stale(reply, request_id):
                    continue
                raise ToolError("bridge out of sync: the reply does not match the request")

    def request_async(self, frame):
        """Send ``frame`` now; the returned future (of the running loop) gets the reply."""
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        frame["async"] = True
        with self.lock:
            request_id = self._send(frame)
            self.pending[request_id] = future
            if self.loop is not loop:
                self._unwatch()
                loop.add_reader(self.sock.fileno(), self._readable)
                self.loop = loop
        return future

    def read_frame(self):
        """The next frame from the host (the guest's main loop between executions)."""
        with self.lock:
            return self._next_frame()

    def _next_frame(self):
        while True:
            frame = self._take()
            if frame is not None:
                return frame
            if len(self.buffer) >= 4:
                (n,) = wire._unpack_len(self.buffer, 0)
                if n > _DIRECT_READ_BYTES:
                    return self._read_large(n)
            # Wait in a poll, not in the read: a read would be woken each time the host
            # reads what this guest sent (the socket's room to write is freed, and a reader
            # waits on the same queue), a wake-up for nothing per call and per execution.
            self.poller.poll()
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError("bridge closed")
            if not self.buffer and len(data) >= 4 and wire._unpack_len(data)[0] == len(data) - 4:
                return wire.decode(memoryview(data)[4:])  # one whole frame: the usual reply
            self.buffer += data

    def _read_large(self, n):
        """A large frame straight into a buffer of its size (no copies while it arrives),
        mapped with its pages in place (as the host does: see ``bridge.frames``)."""
        body = _buffer(n)
        have = len(self.buffer) - 4
        body[:have] = self.buffer[4:]
        del self.buffer[:]
        view = memoryview(body)
        while have < n:
            got = self.sock.recv_into(view[have:], n - have)
            if got == 0:
                raise EOFError("bridge closed")
            have += got
        view.release()
        return wire.decode(body)

    def _take(self):
        buffer = self.buffer
        if len(buffer) < 4:
            return None
        (n,) = wire._unpack_len(buffer, 0)
        end = 4 + n
        if len(buffer) < end:
            return None
        frame = wire.decode(buffer[4:end])
        del buffer[:end]
        return frame

    def _readable(self):
        """The event loop saw the socket readable: read what is there, settle what it holds."""
        with self.lock:
            try:
                data = self.sock.recv(1 << 16, _socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._fail_all("bridge closed")
                return
            self.buffer += data
            while (frame := self._take()) is not None:
                self._settle(frame)
            if not self.pending:
                self._unwatch()

    def _settle(self, reply):
        """Give a reply to the awaitable call it answers; False if none is waiting for it."""
        future = self.pending.pop(reply.get("id"), None)
        if future is None:
            return False
        try:
            future.get_loop().call_soon_threadsafe(_set_result, future, reply)
        except RuntimeError:
            pass  # its event loop is closed: no one awaits it
        return True

    def _fail_all(self, message):
        for future in self.pending.values():
            try:
                future.get_loop().call_soon_threadsafe(
                    _set_exception, future, wire.WireError(message)
                )
            except RuntimeError:
                pass
        self.pending.clear()
        self._unwatch()

    def _unwatch(self):
        if self.loop is not None:
            try:
                self.loop.remove_reader(self.sock.fileno())
            except Exception:
                pass
            self.loop = None


def _buffer(size):
    """A large frame's buffer, its pages in place: in huge pages from 2 MiB on where the
    kernel has them for the asking (as the host's, ``codemode.bridge.frames``)."""
    import mmap

    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    if size >= 2 << 20 and hasattr(mmap, "MADV_HUGEPAGE"):
        body = mmap.mmap(-1, size, flags=flags)
        try:
            body.madvise(mmap.MADV_HUGEPAGE)
            body.madvise(23)  # MADV_POPULATE_WRITE (Linux 5.14): every page in, at once
            return body
        except OSError:  # an older kernel: as below
            body.close()
    return mmap.mmap(-1, size, flags=flags | getattr(mmap, "MAP_POPULATE", 0))


def _stale(reply, request_id):
    """A reply to an earlier call no one awaits any more (its execution ended first)."""
    reply_id = reply.get("id")
    return type(reply_id) is int and reply_id < request_id


def _set_result(future, value):
    if not future.done():
        future.set_result(value)


def _set_exception(future, error):
    if not future.done():
        future.set_exception(error)


bridge = _Bridge()

# The code of the latest executions, newest last: ``inspect`` finds the source of a function
# defined in an earlier execution here (``linecache`` holds only the current one as <code>).
executed = []


# A frame larger than this is read into a buffer of its own size.
_DIRECT_READ_BYTES = 1 << 18

# Set while an awaitable form runs its tool's function: the call is sent, not waited for.
_deferred = contextvars.ContextVar("codemode_deferred_call", default=False)


def call_tool(server, tool, arguments):
    """Call ``server.tool`` on the host with ``arguments`` (a dict). Raises ToolError."""
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict")
    frame = {"op": "call", "server": server, "tool": tool, "args": arguments}
    try:  # what was printed before the call reaches the host first (an approval shows it)
        sys.stdout.flush()
    except Exception:  # the code may have replaced sys.stdout
        pass
    if _deferred.get():
        _deferred.set(False)
        try:
            future = bridge.request_async(frame)
        except wire.WireError as error:
            raise ToolError(f"{server}.{tool}: {error}", tool=f"{server}.{tool}") from None
        return _Pending(_reply_value(server, tool, future))
    try:
        reply = bridge.request(frame)
    except wire.WireError as error:
        raise ToolError(f"{server}.{tool}: {error}", tool=f"{server}.{tool}") from None
    return _value(server, tool, reply)


class _Pending:
    """A call sent by an awaitable form, its reply not read yet."""

    def __init__(self, coroutine):
        self.coroutine = coroutine


async def _reply_value(server, tool, future):
    try:
        reply = await future
    except wire.WireError as error:
        raise ToolError(f"{server}.{tool}: {error}", tool=f"{server}.{tool}") from None
    return _value(server, tool, reply)


def _value(server, tool, reply):
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error") or {}
    raise ToolError(
        error.get("message", "tool call failed"),
        tool=f"{server}.{tool}",
        code=error.get("code"),
    )


def awaitable(function):
    """The awaitable form of a generated tool function (its ``.aio``): the call goes to the
    host at once, and awaiting gives its result, so ``asyncio.gather`` runs calls together."""
    import functools

    @functools.wraps(function)
    async def aio(*args, **kwargs):
        token = _deferred.set(True)
        try:
            sent = function(*args, **kwargs)
        finally:
            _deferred.reset(token)
        if isinstance(sent, _Pending):
            return await sent.coroutine
        return sent

    return aio


class PackageError(Exception):
    """A package could not be installed; ``str(error)`` says why and what to do instead."""


class Packages:
    """``packages.install(["name", ...])``: the host installs them (checked against its config)
    and they import at once. ``pip install name`` lines in the code call this too."""

    def __init__(self):
        self.refused = set()  # top-level imports the host would not install
        self.off = False

    def install(self, names, *, quiet=False):
        if isinstance(names, str):
            names = names.split()
        names = [str(name) for name in names]
        value = self._request(names, automatic=False)
        if not quiet:
            print(f"[packages] {_summary(value)}")
            if value.get("log_tail"):
                print(value["log_tail"])
        return value

    def _request(self, names, *, automatic):
        reply = bridge.request({"op": "install", "names": names, "automatic": automatic})
        if not reply.get("ok"):
            error = reply.get("error") or {}
            if error.get("code") == "packages_off":
                self.off = True
            raise PackageError(error.get("message", "the install failed"))
        value = reply["value"]
        if value["path"] not in sys.path:
            sys.path.append(value["path"])
        importlib.invalidate_caches()
        return value


def _summary(value):
    names = ", ".join(f"{name} {version}" for name, version in value.get("installed", []))
    return f"installed {names}" + (" (cached)" if value.get("cached") else "")


packages = Packages()


class PackagesFinder:
    """Last on ``sys.meta_path``: a top-level import nothing else found is offered to the host,
    which installs it when the config allows that package by name."""

    def find_spec(self, fullname, path=None, target=None):
        if "." in fullname or packages.off or fullname in packages.refused:
            return None
        if fullname in _HOST_ROOTS or fullname.startswith("_"):
            return None
        try:
            value = packages._request([fullname], automatic=True)
        except (PackageError, wire.WireError):
            packages.refused.add(fullname)
            return None
        print(f"[packages] import {fullname}: {_summary(value)}", file=sys.stderr)
        return importlib.machinery.PathFinder.find_spec(fullname, [value["path"]])


# Top-level packages the host serves. ``servers`` is the host's alone; for the others a
# module the host does not have falls through to the ordinary import system.
_HOST_ROOTS = ("servers", "skills", "state")


class ServersFinder:
    """Imports ``servers.*``, ``skills.*`` and ``state`` from sources the host gives on demand."""

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.partition(".")[0]
        if root not in _HOST_ROOTS:
            return None
        reply = bridge.request({"op": "import", "name": fullname})
        if not reply.get("ok"):
            if root != "servers" and (reply.get("error") or {}).get("code") == "module_not_found":
                return None
            raise ModuleNotFoundError(
                (reply.get("error") or {}).get("message", f"No module named {fullname!r}"),
                name=fullname,
            )
        module = reply["value"]
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=module["filename"], is_package=module["package"]
        )
        spec.has_location = True
        spec.loader_state = module
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        state = module.__spec__.loader_state
        filename = state["filename"]
        source = state["source"]
        import linecache

        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
        if module.__name__.count(".") == 2:
            # Importing servers.x.tool rebinds servers.x.tool to the module: keep it callable.
            module.__class__ = _ToolModule


def forget_host_modules():
    """The host's modules changed (a server's tools did): the generated modules imported so
    far, and the skills built on them, are dropped; the next import gets them as they are
    now. A module object the code still holds calls the tools by name, and the host answers
    each call as the catalog is now (a tool gone is refused)."""
    for name in list(sys.modules):
        root = name.partition(".")[0]
        if root in ("servers", "skills") and name != "servers._runtime":
            del sys.modules[name]


class _ToolModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


def install(sock):
    bridge.sock = sock
    bridge.poller = select.poll()
    bridge.poller.register(sock.fileno(), select.POLLIN)
    runtime = sys.modules[__name__]
    sys.modules["servers._runtime"] = runtime
    sys.meta_path.insert(0, ServersFinder())
    sys.meta_path.append(PackagesFinder())

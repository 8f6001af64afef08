"""The template: one guest interpreter that forks every new sandbox, copy-on-write.

The host starts it once in a bubblewrap of its own (namespaces, read-only system paths, no
network; ``codemode.sandbox.template``), with the guest's modules and site directories already
loaded. For each request on its control socket it forks into a new pid namespace (the fork is
its pid 1); the fork then makes itself a sandbox before any of the agent's code can run, the
same one ``bwrap`` makes for a guest started alone:

1. still in the template's user namespace (which owns the new pid namespace, so only there may
   its /proc be mounted), a mount namespace of its own with that /proc;
2. a user namespace of its own, mapping only the agent's uid (so RLIMIT_NPROC counts only its
   own tasks), and new mount, network, IPC and UTS namespaces (the mounts copied from the
   namespace above are locked: the new /proc cannot be taken off to show the template's);
3. private, size-limited tmpfs mounts for /tmp and the workspace; it joins the sandbox's
   cgroups through their ``cgroup.procs`` files, which the host opened and sent with the
   request (the kernel checks a move against the credentials of the file's opener);
4. a cgroup namespace, read-only kernel paths and masked files in its /proc, /dev/pts,
   /dev/shm, a read-only /dev; it forbids user namespaces, sets its limits, drops every
   capability, sets no_new_privs and the seccomp filter, and only then serves the bridge.

Forking straight into the pid namespace, not through a process that makes the namespaces and
forks the guest in them, saves a fork and an exit per sandbox and about 190 of its 670 page
faults (``benchmarks/sandbox.py``: the machine's CPU per sandbox started).

The pages of the interpreter and of every module loaded here stay shared between the template
and all its sandboxes until one of them writes to a page; nothing writable is shared (each
sandbox's writes land in its own copy). Standard library only, like the rest of the guest.
"""

import _signal
import _socket
import ctypes
import fcntl
import gc
import os
import resource
import struct

from . import main as guest_main

_NEWNS = 0x00020000
_NEWCGROUP = 0x02000000
_NEWUTS = 0x04000000
_NEWIPC = 0x08000000
_NEWUSER = 0x10000000
_NEWPID = 0x20000000
_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2
_CAPABILITY_VERSION_3 = 0x20080522
# Where the bridge lands in every forked guest (the host waits on this descriptor number).
BRIDGE_FD = 3
# The fds of one request, in order: the bridge, stdout, stderr, the report socket, then the
# cgroup.procs files of the sandbox's cgroups (one per cgroup v1 controller, or one).
_REQUEST_FDS = 4
_MAX_JOINS = 8

_libc = ctypes.CDLL(None, use_errno=True)
# Looked up here, once: ctypes makes a function's object on its first lookup, and in a fork
# that first lookup (and the pages it writes, copied from the template's) costs each sandbox.
for _name in ("mount", "unshare", "setns", "sethostname", "prctl", "capset"):
    getattr(_libc, _name)
del _name


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class _Seal:
    """What the last steps of every fork take, made once in the template: the highest
    capability number (a constant of the kernel; read in each fork it cost about 0.3 ms),
    ``capset``'s arguments and the seccomp program."""

    def __init__(self, program):
        with open("/proc/sys/kernel/cap_last_cap") as file:
            self.last_cap = int(file.read())
        self.header = _CapHeader(_CAPABILITY_VERSION_3, 0)
        self.no_capabilities = (_CapData * 2)()
        self.program = program  # the bytes ``fprog`` points to
        self.fprog = _Fprog(len(program) // 8, program)


class Config:
    def __init__(self):
        self.control = self.seccomp = None
        self.uid = self.gid = 1000
        self.hostname = "sandbox"
        self.tmpfs = []  # (path, bytes)
        self.proc_read_only = []
        self.proc_masked = []
        self.rlimits = []  # (resource number, value)
        self.guest_args = []
        self.workspace = None


def _parse(argv):
    config = Config()
    it = iter(argv)
    for arg in it:
        if arg == "--control":
            config.control = int(next(it))
        elif arg == "--seccomp":
            config.seccomp = int(next(it))
        elif arg == "--uid":
            config.uid = int(next(it))
        elif arg == "--gid":
            config.gid = int(next(it))
        elif arg == "--hostname":
            config.hostname = next(it)
        elif arg == "--tmpfs":
            path, _, size = next(it).rpartition("=")
            config.tmpfs.append((path, int(size)))
        elif arg == "--proc-ro":
            config.proc_read_only.append(next(it))
        elif arg == "--proc-mask":
            config.proc_masked.append(next(it))
        elif arg == "--rlimit":
            name, _, value = next(it).partition("=")
            config.rlimits.append((getattr(resource, name), int(value)))
        else:
            config.guest_args.append(arg)
    return config


def _fail(what):
    error = ctypes.get_errno()
    raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source, target, fstype, flags, data=None):
    encode = str.encode
    rc = _libc.mount(
        encode(source) if source else None,
        encode(target),
        encode(fstype) if fstype else None,
        flags,
        encode(data) if data else None,
    )
    if rc != 0:
        _fail(f"mount {target}")


def _read_only_bind(source, target):
    _mount(source, target, None, _MS_BIND | _MS_REC)
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _mount(None, target, None, flags)


def _write(path, text):
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as error:
        raise OSError(error.errno, f"writing {text!r} to {path}: {error.strerror}") from None


def _receive(control):
    """One request: its fds (None when the host closed the socket; [] for a request whose
    fds did not all fit: the kernel dropped the rest, a cgroup to join among them perhaps)."""
    space = _socket.CMSG_SPACE((_REQUEST_FDS + _MAX_JOINS) * 4)
    data, ancillary, flags, _ = control.recvmsg(16, space)
    fds = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            count = len(payload) // 4
            fds += struct.unpack(f"{count}i", payload[: count * 4])
    if not data or flags & _socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        return [] if data else None
    return fds


def _sandbox(config, seal, fds, own_pids):
    """In the fork, pid 1 of its new pid namespace: become a sandbox, then serve as its guest
    (the module's steps 1 to 4)."""
    bridge, stdout, stderr, report = fds[:_REQUEST_FDS]
    os.close(config.control)
    os.close(own_pids)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the template ignores it; the guest waits
    if _libc.unshare(_NEWNS) != 0:
        _fail("unshare(CLONE_NEWNS)")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    if _libc.unshare(_NEWUSER) != 0:
        _fail("unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{config.uid} 0 1")
    _write("/proc/self/gid_map", f"{config.gid} 0 1")
    if _libc.unshare(_NEWNS | _NEWNET | _NEWIPC | _NEWUTS) != 0:
        _fail("unshare of the sandbox's namespaces")
    for path, size in config.tmpfs:
        if not path.startswith("/dev/"):
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=0755")
    # Into the sandbox's cgroups ("0": this process) through the files the host opened (the
    # kernel checks the move against their opener): all it forks later starts inside them.
    for fd in fds[_REQUEST_FDS:]:
        try:
            os.write(fd, b"0")
        except OSError as error:
            raise OSError(error.errno, f"joining the sandbox's cgroups: {error.strerror}") from None
        os.close(fd)
    _guest(config, seal, bridge, stdout, stderr, _socket.socket(fileno=report))


def _fork_sandbox(own_pids, stderr):
    """Fork a child that is pid 1 of a new pid namespace. The child's pid, 0 in the child, -1
    when no fork was made."""
    if _libc.unshare(_NEWPID) != 0:
        error = ctypes.get_errno()
        os.write(
            stderr, f"the template could not make a pid namespace: {os.strerror(error)}\n".encode()
        )
        return -1
    try:
        pid = os.fork()
    except OSError as error:
        os.write(stderr, f"the template could not fork a sandbox: {error}\n".encode())
        pid = -1
    # Children are born in the new namespace until the template's own is set for them again,
    # and the next unshare(CLONE_NEWPID) is refused until then: a template that cannot ends,
    # and the host starts a new one.
    if pid != 0 and _libc.setns(own_pids, _NEWPID) != 0:
        os._exit(71)
    return pid


def _guest(config, seal, bridge, stdout, stderr, report_socket):
    os.setsid()
    if _libc.unshare(_NEWCGROUP) != 0:
        _fail("unshare(CLONE_NEWCGROUP)")
    # No user namespace below this one (the seccomp filter refuses them too).
    _write("/proc/sys/user/max_user_namespaces", "0")
    for name in config.proc_read_only:
        if os.path.lexists(f"/proc/{name}"):
            _read_only_bind(f"/proc/{name}", f"/proc/{name}")
    for name in config.proc_masked:
        if os.path.lexists(f"/proc/{name}"):
            _read_only_bind("/dev/null", f"/proc/{name}")
    devpts = "newinstance,ptmxmode=0666,mode=620"
    _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, devpts)
    for path, size in config.tmpfs:
        if path.startswith("/dev/"):
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=0755")
    # /dev is the template's, shared by every sandbox: nothing may be written there.
    _mount(None, "/dev", None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    name = config.hostname.encode()
    if _libc.sethostname(name, len(name)) != 0:
        _fail("sethostname")
    # The guest's descriptors: 0 /dev/null, 1 and 2 the host's pipes, the bridge at BRIDGE_FD
    # (moved out of the way first, so no dup2 below lands on one of them).
    bridge, stdout, stderr = (fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in (bridge, stdout, stderr))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    os.dup2(bridge, BRIDGE_FD)
    for limit, value in config.rlimits:
        resource.setrlimit(limit, (value, value))
    for capability in range(seal.last_cap + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            _fail("dropping the capability bounding set")
    if _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        _fail("clearing ambient capabilities")
    if _libc.capset(ctypes.byref(seal.header), ctypes.byref(seal.no_capabilities)) != 0:
        _fail("capset")
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("no_new_privs")
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(seal.fprog), 0, 0) != 0:
        _fail("seccomp")
    # The host reads this process's pid (as the host sees it) from the message's credentials.
    report_socket.sendall(b"sealed")
    report_socket.close()
    os.chdir(config.workspace)  # mounted after the template entered the directory below it
    guest_main.serve(BRIDGE_FD, config.workspace, True)


def main(argv):
    config = _parse(argv)
    program = b""
    while True:
        chunk = os.read(config.seccomp, 65536)
        if not chunk:
            break
        program += chunk
    os.close(config.seccomp)
    seal = _Seal(program)
    _, config.workspace, _ = guest_main.prepare(config.guest_args)
    # A proc instance no sandbox can reach (each one's /tmp covers it): the kernel lets a
    # user namespace mount a new /proc only where an uncovered one exists.
    _mount("proc", "/tmp", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    os.chdir("/")
    # The kernel reaps each sandbox as it ends. A handler that reaped them ran only when the
    # receive below was interrupted: a signal that came just before it blocked waited for the
    # next request, and the sandbox stayed a zombie until then.
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)
    control = _socket.socket(fileno=config.control)
    own_pids = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    # What every first execution imports (and an error's report), what every generated
    # server module imports (``__future__``, ``typing``), what code that reads and prints
    # results imports most (``json``), and the compiler's state, made once for all the forks:
    # shared pages here, where each sandbox made its own when first used (``__future__``,
    # ``typing`` and ``json``: 6-8 ms and 1.9 MiB of a sandbox's own memory at its first
    # ``from servers import ...``).
    import __future__  # noqa: F401

    import json  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import typing  # noqa: F401

    guest_main.prime_compiler()

    gc.collect()
    gc.freeze()  # the collector never writes to what is shared with the sandboxes
    control.sendall(b"ready")
    while True:
        try:
            fds = _receive(control)
        except InterruptedError:
            continue
        if fds is None:
            os._exit(0)
        if not _REQUEST_FDS <= len(fds) <= _REQUEST_FDS + _MAX_JOINS:
            for fd in fds:
                os.close(fd)
            continue
        pid = _fork_sandbox(own_pids, fds[2])
        if pid == 0:
            try:
                _sandbox(config, seal, fds, own_pids)
            except BaseException as error:
                os.write(fds[2], f"the sandbox could not start: {error}\n".encode())
            os._exit(70)
        for fd in fds:
            os.close(fd)

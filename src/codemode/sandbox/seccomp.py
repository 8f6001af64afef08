"""The seccomp filter every sandbox runs under, compiled to BPF for ``bwrap --seccomp FD``.

Default allow, with a deny list: the sandbox already has no network, no host filesystem and no
privileges; the filter removes the kernel surface that namespaces do not cover (other socket
families, tracing, mounting, new namespaces, keyrings, eBPF, io_uring, userfaultfd, perf...),
kernel objects counted against the host user's quotas (inotify, message queues) and memory the
host cannot measure without cgroups (memfd, SysV shared memory and messages).
Syscalls from a foreign architecture (32-bit ABIs on x86_64) kill the process.
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import Any

from codemode.errors import IsolationUnavailableError

__all__ = ["DENIED_SYSCALLS", "build_filter_bpf"]

DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "vhangup",
    "personality",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "nfsservctl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "afs_syscall",
    "vserver",
    "mbind",
    "migrate_pages",
    "move_pages",
    "set_mempolicy",
    "landlock_create_ruleset",
    # Signals chosen through a struct in memory (which seccomp cannot read): a timer or a
    # message-queue notification could deliver SIGCONT to code stopped between executions.
    "timer_create",
    "mq_notify",
    # Kernel objects charged to the host user's own quotas (every sandbox runs as that user
    # outside its namespaces): one sandbox holding all 128 inotify instances or the user's
    # 800 KiB of POSIX message queues stops the host and every other session using them.
    "inotify_init",
    "inotify_init1",
    "mq_open",
    # Memory no per-process measure sees: pages written to a memfd or a SysV segment (then
    # unmapped) or queued SysV messages are in no RSS and under no RLIMIT_AS, so without
    # cgroups they would pass the memory limit unseen. /tmp and /dev/shm files are measured.
    "memfd_create",
    "memfd_secret",
    "shmget",
    "msgget",
)

_AF_UNIX = 1
_S_ISUID = 0o4000
_S_ISGID = 0o2000
# Where each call that sets a file's mode takes it.
_MODE_ARGUMENT = {
    "chmod": 1,
    "fchmod": 1,
    "fchmodat": 2,
    "fchmodat2": 2,
    "open": 2,
    "openat": 3,
    "creat": 1,
    "mknod": 1,
    "mknodat": 2,
    "mkdir": 1,
    "mkdirat": 2,
}
_SOL_SOCKET = 1
# SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE (the same numbers on x86_64 and aarch64).
_SOCKET_BUFFER_OPTIONS = (7, 8, 32, 33)
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_TIOCSIG = 0x40045436
_F_SETSIG = 10
_PR_SET_PDEATHSIG = 1
_SIGCONT = 18  # the same number on x86_64 and aarch64
# Where each signal-sending syscall takes the signal number.
_SIGNAL_ARGUMENT = {
    "kill": 1,
    "tkill": 1,
    "tgkill": 2,
    "rt_sigqueueinfo": 1,
    "rt_tgsigqueueinfo": 2,
    "pidfd_send_signal": 1,
}


def build_filter_bpf() -> bytes:
    """Compile the filter. Raises IsolationUnavailableError when libseccomp is missing."""
    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError) as error:
        raise IsolationUnavailableError(
            f"seccomp is unavailable: {error}",
            fix="install libseccomp2 (apt-get install libseccomp2) and the pyseccomp package",
        ) from error

    deny = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            continue  # not a syscall on this architecture
    no_family = seccomp.ERRNO(errno.EAFNOSUPPORT)
    flt.add_rule(no_family, "socket", seccomp.Arg(0, seccomp.NE, _AF_UNIX))
    flt.add_rule(no_family, "socketpair", seccomp.Arg(0, seccomp.NE, _AF_UNIX))
    # Socket buffers stay at the kernel's default size: a sandbox without cgroups is charged a
    # default buffer for each socket it holds (ProcMeter), and a raised one (4 MiB here) would
    # hold memory beyond that count. The call succeeds and changes nothing (a size is a hint).
    for option in _SOCKET_BUFFER_OPTIONS:
        flt.add_rule(
            seccomp.ERRNO(0),
            "setsockopt",
            seccomp.Arg(1, seccomp.EQ, _SOL_SOCKET),
            seccomp.Arg(2, seccomp.EQ, option),
        )
    for flag in _CLONE_NAMESPACE_FLAGS:
        flt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # clone3 passes flags in memory, which seccomp cannot inspect: make libc fall back to clone.
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for request in (_TIOCSTI, _TIOCLINUX):
        flt.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    _deny_sigcont(flt, deny, seccomp)
    _deny_set_id_bits(flt, deny, seccomp)
    with tempfile.TemporaryFile() as handle:
        flt.export_bpf(handle)
        handle.flush()
        size = os.fstat(handle.fileno()).st_size
        return os.pread(handle.fileno(), size, 0)


def _deny_sigcont(flt: Any, deny: Any, seccomp: Any) -> None:
    """Nothing inside may send SIGCONT, by any route. Between executions the host stops every
    task with SIGSTOP; only the host resumes them. Without this, one process could resume
    another in the moment before its own stop, or a timer could resume its own process later."""
    for name, argument in _SIGNAL_ARGUMENT.items():
        flt.add_rule(deny, name, seccomp.Arg(argument, seccomp.EQ, _SIGCONT))
    # The signal a file descriptor sends when ready (F_SETSIG), a child's exit signal (the low
    # byte of clone's flags), the parent-death signal, and a pty's TIOCSIG.
    flt.add_rule(deny, "fcntl", seccomp.Arg(1, seccomp.EQ, _F_SETSIG))
    flt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, 0xFF, _SIGCONT))
    flt.add_rule(
        deny,
        "prctl",
        seccomp.Arg(0, seccomp.EQ, _PR_SET_PDEATHSIG),
        seccomp.Arg(1, seccomp.EQ, _SIGCONT),
    )
    flt.add_rule(
        deny,
        "ioctl",
        seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCSIG),
        seccomp.Arg(2, seccomp.EQ, _SIGCONT),
    )


def _deny_set_id_bits(flt: Any, deny: Any, seccomp: Any) -> None:
    """No file gets a setuid or setgid bit. With a host directory as the workspace, a file the
    code made is the host user's file there (root's, when the host runs as root): setuid, it
    would run as that user for anyone on the host who can reach the directory."""
    for name, argument in _MODE_ARGUMENT.items():
        for bit in (_S_ISUID, _S_ISGID):
            try:
                flt.add_rule(deny, name, seccomp.Arg(argument, seccomp.MASKED_EQ, bit, bit))
            except (OSError, ValueError, RuntimeError):
                continue  # not a syscall on this architecture
    # openat2 passes its mode in memory, which seccomp cannot read: callers fall back to openat.
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "openat2")

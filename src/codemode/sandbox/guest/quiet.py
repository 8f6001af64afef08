"""Every signal blocked while the guest waits for its next frame. Standard library only.

A guest alone in its sandbox that waits with every signal it catches blocked cannot run, and
the host leaves it asleep instead of stopping it (``codemode.sandbox.resting``).
``pthread_sigmask`` blocks every signal but the C library's own two (32 and 33: a thread's
cancellation, and set*id calls across threads), and the C library handles those once a thread
was started: a handler the host cannot tell from one of the code's. So once the code started a
thread, the wait blocks them too, with the system call itself (through ``ctypes``, imported
then and only then). Anything else (an architecture not known here, code that tampered with
this module) leaves them unblocked, and the host stops the sandbox, as it always did.
"""

import _signal
import _thread
import os

_EVERY_SIGNAL = _signal.valid_signals()
# rt_sigprocmask's number, where the C library's wrapper would leave its own signals out.
_RT_SIGPROCMASK = {"x86_64": 14, "aarch64": 135}.get(os.uname().machine)
_SIG_BLOCK, _SIG_SETMASK = 0, 2

_started = [False]  # has the code started a thread (through _thread, as threading does)?


def watch_threads():
    """Note the first thread the code starts. Called before ``threading`` is imported, which
    keeps ``_thread``'s function as its own."""
    for name in ("start_new_thread", "start_joinable_thread", "start_new"):
        real = getattr(_thread, name, None)
        if real is None:
            continue

        def start(*args, _real=real, **kwargs):
            _started[0] = True
            return _real(*args, **kwargs)

        setattr(_thread, name, start)


class _Raw:
    """rt_sigprocmask itself, every signal included."""

    def __init__(self):
        import ctypes

        self._ctypes = ctypes
        self._syscall = ctypes.CDLL(None, use_errno=True).syscall
        self._syscall.restype = ctypes.c_long
        self._every = ctypes.c_uint64(0xFFFFFFFFFFFFFFFF)  # SIGKILL and SIGSTOP stay open

    def block(self):
        old = self._ctypes.c_uint64()
        byref = self._ctypes.byref
        if self._syscall(_RT_SIGPROCMASK, _SIG_BLOCK, byref(self._every), byref(old), 8) != 0:
            return None
        return old

    def restore(self, old):
        self._syscall(_RT_SIGPROCMASK, _SIG_SETMASK, self._ctypes.byref(old), None, 8)


_raw = []  # the one _Raw, once needed


def block():
    """Block every signal; returns what ``restore`` needs to put the code's mask back."""
    if _started[0] and _RT_SIGPROCMASK is not None:
        try:
            if not _raw:
                _raw.append(_Raw())
            old = _raw[0].block()
        except Exception:  # no ctypes here: the C library's two stay unblocked
            old = None
        if old is not None:
            return old
    return _signal.pthread_sigmask(_signal.SIG_BLOCK, _EVERY_SIGNAL)


def restore(saved):
    if isinstance(saved, set):
        _signal.pthread_sigmask(_signal.SIG_SETMASK, saved)
    else:
        _raw[0].restore(saved)

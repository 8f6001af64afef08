"""Prove, from inside, that a sandbox is isolated. Tests of hostile code call this first."""

from __future__ import annotations

import json
from dataclasses import dataclass

from codemode.errors import IsolationUnavailableError
from codemode.sandbox.runner import Sandbox

__all__ = ["IsolationReport", "probe_isolation", "require_isolation"]

_PROBE = r"""
import json, os, socket
facts = {"uid": os.getuid(), "pid": os.getpid()}
facts["environ"] = open("/proc/self/environ", "rb").read() != b""
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    facts["inet_socket"] = True
except OSError:
    facts["inet_socket"] = False
def listable(path):
    try:
        return bool(os.listdir(path))
    except OSError:
        return False
# A traversable-only skeleton (the interpreter's original path, say) shows no host file.
facts["host_root_visible"] = os.path.exists("/etc/shadow") or listable("/home")
facts["pid1_is_guest"] = os.getpid() == 1
import ctypes
facts["can_unshare"] = ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0
print(json.dumps(facts))
"""


@dataclass(frozen=True)
class IsolationReport:
    isolated_backend: bool
    facts: dict[str, object]

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.isolated_backend:
            found.append("the backend is the unsafe, unisolated one")
        f = self.facts
        if f.get("uid") == 0:
            found.append("code runs as uid 0")
        if f.get("inet_socket"):
            found.append("AF_INET sockets can be created")
        if f.get("host_root_visible"):
            found.append("host files (/etc/shadow or /home) are visible")
        if not f.get("pid1_is_guest"):
            found.append("not in a private pid namespace (the guest is not pid 1)")
        if f.get("can_unshare"):
            found.append("new namespaces can be created")
        if f.get("environ"):
            found.append("the environment is not empty")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems


def probe_isolation(sandbox: Sandbox) -> IsolationReport:
    result = sandbox.execute(_PROBE, timeout_s=10)
    try:
        facts = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        facts = {"probe_failed": result.to_dict()}
    return IsolationReport(sandbox.isolated, facts)


def require_isolation(sandbox: Sandbox) -> IsolationReport:
    """Raise unless the sandbox is verifiably isolated. Never run attacks without this."""
    report = probe_isolation(sandbox)
    if not report.ok:
        raise IsolationUnavailableError(
            "refusing to run hostile code: " + "; ".join(report.problems),
            fix="use the default bubblewrap backend on a machine with user namespaces",
        )
    return report

"""Run hostile Python at full CPython speed, with host tools reachable only over the bridge."""

from codemode.sandbox.backends import (
    BwrapBackend,
    SandboxBackend,
    SandboxProcess,
    UnsafeHostBackend,
    make_backend,
)
from codemode.sandbox.enforcement import Enforcement, detect_enforcement
from codemode.sandbox.pool import SandboxPool
from codemode.sandbox.result import ExecutionResult
from codemode.sandbox.runner import Sandbox
from codemode.sandbox.session import SandboxSession
from codemode.settings.sandbox import Limits, SandboxSettings

__all__ = [
    "BwrapBackend",
    "Enforcement",
    "ExecutionResult",
    "Limits",
    "Sandbox",
    "SandboxBackend",
    "SandboxPool",
    "SandboxProcess",
    "SandboxSession",
    "SandboxSettings",
    "UnsafeHostBackend",
    "detect_enforcement",
    "make_backend",
]

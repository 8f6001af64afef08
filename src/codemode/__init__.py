"""codemode: agents use tools by writing code that runs in a sandbox.

The library face, for embedding codemode in a Python program::

    from codemode import Codemode, load_config

    async with Codemode(load_config(path)) as engine:
        answer = await engine.search("create an issue")
        result = await engine.execute("from servers import github\\n...")

The names below are imported on first use, so ``import codemode`` (and the CLI's ``--help``)
stays fast. The list is pinned by a test: adding a name is a decision, removing one a break.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig, ServerConfig, load_config
    from codemode.engine.engine import Codemode, SearchAnswer
    from codemode.engine.output import OutputCallback
    from codemode.errors import (
        CodemodeError,
        ConfigError,
        SandboxError,
        ToolError,
        UsageError,
    )
    from codemode.sandbox.result import ExecutionResult
    from codemode.tools import ToolSpec

# Declared for type checkers; the value is read from the package metadata on first use.
__version__: str

__all__ = [
    "Codemode",
    "CodemodeConfig",
    "CodemodeError",
    "ConfigError",
    "ExecutionResult",
    "OutputCallback",
    "SandboxError",
    "SearchAnswer",
    "ServerConfig",
    "ToolError",
    "ToolSpec",
    "UsageError",
    "__version__",
    "load_config",
]

_HOMES = {
    "Codemode": "codemode.engine.engine",
    "SearchAnswer": "codemode.engine.engine",
    "OutputCallback": "codemode.engine.output",
    "CodemodeConfig": "codemode.config",
    "ServerConfig": "codemode.config",
    "load_config": "codemode.config",
    "ExecutionResult": "codemode.sandbox.result",
    "ToolSpec": "codemode.tools",
    "CodemodeError": "codemode.errors",
    "ConfigError": "codemode.errors",
    "SandboxError": "codemode.errors",
    "ToolError": "codemode.errors",
    "UsageError": "codemode.errors",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codemode")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""Every exception codemode raises, in one tree.

    CodemodeError                     base; every error has a stable ``code`` and says how to fix it
    ├── UsageError                    a mistake by whoever set codemode up or called its API
    │   ├── ConfigError               a bad config file, key or value (names the file and key)
    │   ├── SchemaError               a tool schema or OpenAPI document that cannot be used
    │   └── IsolationUnavailableError the sandbox cannot be had here (says what is missing)
    ├── RuntimeFailure                something failed while running
    │   ├── SandboxError              a sandbox could not start or died
    │   ├── BridgeProtocolError       a malformed, oversized, forged or late bridge frame
    │   ├── ConnectorError            an upstream (MCP server, HTTP API) failed or is unreachable
    │   └── SessionError              a session cannot do what was asked (closed, paused...)
    │       ├── UnknownSessionError   an unknown, expired or foreign session handle
    │       └── ApprovalMismatchError an approval for arguments other than the call's
    └── ToolError                     a tool call failed; meant for the model and the agent's code
        ├── ToolNotFoundError         no such tool in the catalog
        ├── ToolNotGrantedError       the tool exists but this execution may not call it
        └── UpstreamUnavailableError  the tool's server is down (it will be restarted)

``ToolError`` messages are returned to the model as results, never as host tracebacks.
"""

from __future__ import annotations

__all__ = [
    "ApprovalMismatchError",
    "BridgeProtocolError",
    "CodemodeError",
    "ConfigError",
    "ConnectorError",
    "IsolationUnavailableError",
    "RuntimeFailure",
    "SandboxError",
    "SchemaError",
    "SessionError",
    "ToolError",
    "ToolNotFoundError",
    "ToolNotGrantedError",
    "UnknownSessionError",
    "UpstreamUnavailableError",
    "UsageError",
]


class CodemodeError(Exception):
    """Base of every codemode error. ``code`` is stable and safe to match on."""

    code = "codemode_error"

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(f"{message} (fix: {fix})" if fix else message)


class UsageError(CodemodeError):
    code = "usage_error"


class ConfigError(UsageError):
    """A config file is wrong. Carries the file and the key so the message can point at both."""

    code = "config_error"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        key: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = path
        self.key = key
        where = ", ".join(part for part in (path, f"key {key!r}" if key else None) if part)
        super().__init__(f"{where}: {message}" if where else message, fix=fix)


class SchemaError(UsageError):
    code = "schema_error"


class IsolationUnavailableError(UsageError):
    code = "isolation_unavailable"


class RuntimeFailure(CodemodeError):
    code = "runtime_failure"


class SandboxError(RuntimeFailure):
    code = "sandbox_error"


class BridgeProtocolError(RuntimeFailure):
    code = "bridge_protocol_error"


class ConnectorError(RuntimeFailure):
    code = "connector_error"


class SessionError(RuntimeFailure):
    code = "session_error"


class UnknownSessionError(SessionError):
    code = "unknown_session"


class ApprovalMismatchError(SessionError):
    """An approval named arguments other than the ones the call would run with."""

    code = "approval_mismatch"


class ToolError(CodemodeError):
    """A tool call failed. The message is shown to the agent's code as ``ToolError``."""

    code = "tool_error"


class ToolNotFoundError(ToolError):
    code = "tool_not_found"


class ToolNotGrantedError(ToolError):
    code = "tool_not_granted"


class UpstreamUnavailableError(ToolError):
    code = "upstream_unavailable"

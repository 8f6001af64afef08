"""Every exception codemode raises, in one tree.

    CodemodeError                     base; every error has a stable ``code`` and says how to fix it
    ├── UsageError                    a mistake by whoever set codemode up or called its API
    │   ├── ConfigError               a bad config file, key or value (names the file and key)
    │   ├── SchemaError               a tool schema or OpenAPI document that cannot be used
    │   ├── IsolationUnavailableError the sandbox cannot be had here (says what is missing)
    │   ├── IncompatibleDependencyError an installed library changed an internal codemode uses
    │   ├── SkillNotFoundError        no such skill for this owner (asked for by name)
    │   └── ModelConfigError          a model that cannot be used: unknown provider or model,
    │                                 missing or refused API key
    ├── RuntimeFailure                something failed while running
    │   ├── SandboxError              a sandbox could not start or died
    │   ├── BridgeProtocolError       a malformed, oversized, forged or late bridge frame
    │   ├── ServersNotLoadedError     configured servers did not load (a command refuses to go on)
    │   ├── SessionError              a session cannot do what was asked (closed, paused...)
    │   │   ├── UnknownSessionError   an unknown, expired or foreign session handle
    │   │   ├── ApprovalMismatchError an approval for arguments other than the call's
    │   │   ├── SessionQuotaError     a client (or the gateway) holds all the sessions it may
    │   │   ├── SessionBusyError      the session runs on another gateway replica right now
    │   │   ├── SessionStateError     a session asked for a move its state does not allow (a
    │   │   │                         second execution while one runs, resume when not paused)
    │   │   ├── ApprovalDecidedError  an approval that was already answered (on any replica)
    │   │   ├── ReplicaLostError      the replica running a paused execution stopped
    │   │   └── WorkspaceFileError    a workspace file that cannot be served (missing, a link...)
    │   ├── StateStoreError           a state, memory, skill or checkpoint store failed
    │   │   ├── SharedStoreDecryptError a value in the shared store cannot be decrypted (a wrong
    │   │   │                         or missing key, changed or moved), or is unencrypted there
    │   │   ├── StoreBusyError        a SQLite file stayed locked by other processes too long
    │   │   └── StoreVersionError     a SQLite file written by a newer codemode (a downgrade)
    │   ├── ModelInstallError         the embedding model could not be fetched, verified or unpacked
    │   ├── ModelError                a model provider failed (after retries) or answered nonsense
    │   │   └── ContextLengthError    the conversation does not fit the model's context window
    │   └── ClusterError              a sandbox cluster cannot be reached or used
    │       └── ClusterBusyError      every node is at capacity: retry after ``retry_after_s``
    └── ToolError                     a tool call failed; meant for the model and the agent's code
        ├── ToolNotFoundError         no such tool in the catalog
        ├── ToolNotGrantedError       the tool exists but this execution may not call it
        ├── UpstreamUnavailableError  the tool's server could not be reached, failed or timed out
        ├── DataFlowDeniedError       a call would send hidden data where the flow rules forbid
        └── SkillRefusedError         a skill cannot be saved or imported (failing tests...)

``ToolError`` messages are returned to the model as results, never as host tracebacks.
"""

from __future__ import annotations

__all__ = [
    "ApprovalDecidedError",
    "ApprovalLinkError",
    "ApprovalMismatchError",
    "ApprovalReservedError",
    "BridgeProtocolError",
    "ClusterBusyError",
    "ClusterError",
    "CodemodeError",
    "ConfigError",
    "ContextLengthError",
    "DataFlowDeniedError",
    "IncompatibleDependencyError",
    "IsolationUnavailableError",
    "ModelConfigError",
    "ModelError",
    "ModelInstallError",
    "PackageError",
    "PackageNotAllowedError",
    "ReplicaLostError",
    "RuntimeFailure",
    "SandboxError",
    "SchemaError",
    "ServersNotLoadedError",
    "SessionBusyError",
    "SessionError",
    "SessionQuotaError",
    "SessionStateError",
    "SharedStoreDecryptError",
    "SkillNotFoundError",
    "SkillRefusedError",
    "StateStoreError",
    "StoreBusyError",
    "StoreVersionError",
    "TemplateUnavailableError",
    "ToolError",
    "ToolNotFoundError",
    "ToolNotGrantedError",
    "UnknownSessionError",
    "UpstreamUnavailableError",
    "UsageError",
    "WorkspaceFileError",
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


class IncompatibleDependencyError(UsageError):
    """An installed library (the MCP SDK, uvicorn) no longer has an internal codemode relies on.

    Raised by ``codemode.sdk_compat``, the one module that touches such internals.
    """

    code = "incompatible_dependency"


class ModelConfigError(UsageError):
    code = "model_config_error"


class RuntimeFailure(CodemodeError):
    code = "runtime_failure"


class SandboxError(RuntimeFailure):
    code = "sandbox_error"


class TemplateUnavailableError(SandboxError):
    """The sandbox template could not start here: sandboxes start one bubblewrap each."""

    code = "template_unavailable"


class PackageError(RuntimeFailure):
    """A package could not be installed for the code (see ``codemode.sandbox.packages``)."""

    code = "package_error"


class PackageNotAllowedError(PackageError):
    code = "package_not_allowed"


class BridgeProtocolError(RuntimeFailure):
    code = "bridge_protocol_error"


class ServersNotLoadedError(RuntimeFailure):
    """One or more configured servers did not load; ``failures`` maps each to the reason."""

    code = "servers_not_loaded"

    def __init__(self, failures: dict[str, str], *, fix: str | None = None) -> None:
        self.failures = dict(failures)
        reasons = "; ".join(f"{name}: {why}" for name, why in sorted(self.failures.items()))
        noun = "server" if len(self.failures) == 1 else "servers"
        super().__init__(
            f"{len(self.failures)} configured {noun} did not load ({reasons})", fix=fix
        )


class SessionError(RuntimeFailure):
    code = "session_error"


class UnknownSessionError(SessionError):
    code = "unknown_session"


class ApprovalMismatchError(SessionError):
    """An approval named arguments other than the ones the call would run with."""

    code = "approval_mismatch"


class SessionQuotaError(SessionError):
    code = "session_quota"


class SessionBusyError(SessionError):
    """Another gateway replica holds the session's lease (it is running code there)."""

    code = "session_busy"


class SessionStateError(SessionError):
    """A session was asked for a move its life-cycle state does not allow; ``state`` is the
    state it was in (``codemode.engine.life.Life``'s value)."""

    code = "session_state"

    def __init__(self, message: str, *, fix: str | None = None, state: str = "") -> None:
        super().__init__(message, fix=fix)
        self.state = state


class ApprovalDecidedError(SessionError):
    code = "approval_decided"


class ApprovalReservedError(SessionError):
    """The model tried to answer an approval that only the person behind the client may."""

    code = "approval_reserved"


class ApprovalLinkError(SessionError):
    """An approval page link that is unknown, expired, used, or opened by another browser."""

    code = "approval_link_refused"


class ReplicaLostError(SessionError):
    code = "replica_lost"


class WorkspaceFileError(SessionError):
    code = "workspace_file"


class StateStoreError(RuntimeFailure):
    """A state, memory or checkpoint store could not be reached or written."""

    code = "state_store_error"


class SharedStoreDecryptError(StateStoreError):
    """A value read from the shared store (``[gateway] shared_store``) failed its check: it was
    sealed with a key this replica does not have, changed, copied from another key, or it is
    unencrypted although a key is set (or encrypted although none is). Never returned as data."""

    code = "shared_store_decrypt"


class StoreBusyError(StateStoreError):
    """A SQLite store could not be opened (its journal mode set, its schema migrated) before
    the deadline because other processes kept it locked."""

    code = "store_busy"


class StoreVersionError(StateStoreError):
    """A SQLite store has a schema newer than this codemode knows: a newer codemode wrote it.
    Opening it anyway could corrupt it, so it is refused."""

    code = "store_version"


class ModelInstallError(RuntimeFailure):
    """The search model's wheel could not be found, downloaded, verified or unpacked."""

    code = "model_install_failed"


class ClusterError(RuntimeFailure):
    """The sandbox cluster (Ray) cannot be reached, or a sandbox cannot be placed on it."""

    code = "cluster_error"


class ClusterBusyError(ClusterError):
    """Every node is at capacity. The caller should retry after ``retry_after_s`` seconds."""

    code = "busy"

    def __init__(self, retry_after_s: float, *, fix: str | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            f"busy, retry after {retry_after_s:g} s: every sandbox node is at capacity",
            fix=fix
            or "retry after that many seconds, close idle sessions, or add worker nodes "
            "(each offers `codemode_sandbox` slots)",
        )


class SkillNotFoundError(UsageError):
    """No saved skill by that name for this owner (a person asked for it by name)."""

    code = "skill_not_found"


class ModelError(RuntimeFailure):
    code = "model_error"


class ContextLengthError(ModelError):
    code = "context_length_exceeded"


class ModelTimeoutError(ModelError):
    """The model did not answer in the time the call (or the whole run) had left."""

    code = "model_timeout"


class ToolError(CodemodeError):
    """A tool call failed. The message is shown to the agent's code as ``ToolError``."""

    code = "tool_error"


class ToolNotFoundError(ToolError):
    code = "tool_not_found"


class ToolNotGrantedError(ToolError):
    code = "tool_not_granted"


class UpstreamUnavailableError(ToolError):
    code = "upstream_unavailable"


class DataFlowDeniedError(ToolError):
    """A call would send tokenized data (or pieces of it) to a server the flow rules do not
    allow."""

    code = "data_flow_denied"


class SkillRefusedError(ToolError):
    """A skill was not saved or may not be imported; the message says why (test output...)."""

    code = "skill_refused"

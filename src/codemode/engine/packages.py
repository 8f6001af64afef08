"""Packages on demand for an engine's sessions: the host installer, every install audited."""

from __future__ import annotations

import time
from typing import Any

from codemode.audit import AuditEvent, AuditLog
from codemode.audit.events import argument_digest
from codemode.errors import CodemodeError, PackageNotAllowedError
from codemode.sandbox.packages import PackageInstaller, SandboxPackages, cache_root
from codemode.settings.sandbox import PackageSettings

__all__ = ["AuditedPackages", "session_packages"]

# How installs appear in the audit log: a call of this pseudo-tool.
AUDIT_SERVER = "_packages"


class AuditedPackages:
    """A ``PackageProvider`` that records every install (allowed, refused or failed)."""

    def __init__(
        self,
        inner: SandboxPackages,
        audit_log: AuditLog | None,
        session: str,
        digest_key: bytes | None = None,
    ) -> None:
        self.inner = inner
        self.audit_log = audit_log
        self.session = session
        self.digest_key = digest_key

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, Any]:
        arrived, started = time.time(), time.monotonic()
        try:
            value = self.inner.install(requirements, automatic=automatic)
        except CodemodeError as error:
            refused = isinstance(error, PackageNotAllowedError)
            if not (automatic and refused):  # a failed import of an unlisted name is not news
                self._record(arrived, started, requirements, error, refused=refused)
            raise
        self._record(arrived, started, requirements, None, value=value)
        return value

    def _record(
        self,
        arrived: float,
        started: float,
        requirements: list[str],
        error: CodemodeError | None,
        *,
        refused: bool = False,
        value: dict[str, Any] | None = None,
    ) -> None:
        if self.audit_log is None:
            return
        if value is not None:
            installed = ", ".join(f"{name}=={version}" for name, version in value["installed"])
            message = f"installed {installed}" + (" (cached)" if value["cached"] else "")
        else:
            message = error.message.split("\n", 1)[0][:300] if error is not None else ""
        self.audit_log.append(
            AuditEvent(
                time=arrived,
                session=self.session,
                server=AUDIT_SERVER,
                tool="install",
                args_digest=argument_digest({"requirements": requirements}, key=self.digest_key),
                decision="deny" if refused else "allow",
                duration_ms=(time.monotonic() - started) * 1000,
                outcome="denied" if refused else ("error" if error is not None else "ok"),
                error_code=error.code if error is not None else None,
                message=message,
            )
        )


def session_packages(
    settings: PackageSettings,
    audit_log: AuditLog | None,
    session: str,
    digest_key: bytes | None = None,
) -> AuditedPackages | None:
    """The provider for one session, or None when ``[sandbox.packages]`` is off."""
    if not settings.enabled:
        return None
    installer = PackageInstaller(settings, cache_root(settings))
    return AuditedPackages(SandboxPackages(installer), audit_log, session, digest_key)

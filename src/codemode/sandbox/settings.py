"""Sandbox settings: limits and isolation, with safe defaults. All configurable."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from codemode.errors import ConfigError

__all__ = ["ENFORCEABLE_LIMITS", "Limits", "SandboxSettings"]

MiB = 1024 * 1024
GiB = 1024 * MiB
T = TypeVar("T")
# Settings where 0 means "none" rather than a mistake.
_ZERO_ALLOWED = frozenset({"pool_size"})
# Limits whose enforcement depends on the machine (see codemode.sandbox.enforcement).
ENFORCEABLE_LIMITS = ("memory", "cpu_time", "processes")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one execution (and its sandbox) may use. Breaking one ends the execution."""

    wall_time_s: float = 60.0
    cpu_time_s: float = 120.0
    memory_bytes: int = 2 * GiB
    processes: int = 64
    open_files: int = 256
    workspace_bytes: int = 1 * GiB
    workspace_inodes: int = 100_000
    tmp_bytes: int = 256 * MiB
    output_kept_bytes: int = 1 * MiB  # per stream, split between head and tail
    # What the result shows the model (characters).
    stdout_tail_chars: int = 1_000
    stderr_head_chars: int = 500
    stderr_tail_chars: int = 1_500


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    limits: Limits = field(default_factory=Limits)
    # Sandboxes started ahead of demand, so a new session does not wait for a container.
    pool_size: int = 2
    # Extra site-packages directories the agent's code may import from (read-only).
    # By default the interpreter codemode runs in (its virtualenv) is offered.
    python_paths: tuple[str, ...] | None = None
    # Running without isolation is for debugging trusted code only. The name says so.
    unsafe_no_isolation: bool = False
    # Limits the machine cannot enforce (see sandbox.enforcement) that you accept anyway, by
    # name; only "processes" can be missing today (the host's root without writable cgroups).
    accept_unenforced_limits: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "config") -> SandboxSettings:
        """Build from a config table such as ``[sandbox]`` and ``[sandbox.limits]``."""
        data = dict(data)
        limits_data = data.pop("limits", {})
        if not isinstance(limits_data, dict):
            raise ConfigError("must be a table", path=source, key="sandbox.limits")
        limits = _build(Limits, limits_data, source, "sandbox.limits")
        if "python_paths" in data:
            paths = data["python_paths"]
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise ConfigError(
                    "must be a list of directory paths",
                    path=source,
                    key="sandbox.python_paths",
                )
            data["python_paths"] = tuple(paths)
        if "accept_unenforced_limits" in data:
            names = data["accept_unenforced_limits"]
            if not isinstance(names, list) or not set(names) <= set(ENFORCEABLE_LIMITS):
                raise ConfigError(
                    f"invalid value {names!r}",
                    path=source,
                    key="sandbox.accept_unenforced_limits",
                    fix=f"a list of limit names among {list(ENFORCEABLE_LIMITS)}",
                )
            data["accept_unenforced_limits"] = tuple(names)
        settings = _build(cls, data, source, "sandbox")
        return dataclasses.replace(settings, limits=limits)


def _build(kind: type[T], data: dict[str, Any], source: str, prefix: str) -> T:
    fields = {f.name: f for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields or key == "limits":
            known = ", ".join(sorted(n for n in fields if n != "limits"))
            raise ConfigError(
                f"unknown setting {key!r}",
                path=source,
                key=f"{prefix}.{key}",
                fix=f"use one of: {known}",
            )
        default = getattr(kind(), key)
        wanted = "a number above 0"
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int | float) and not isinstance(default, bool):
            zero_ok = key in _ZERO_ALLOWED
            wanted = "a number >= 0" if zero_ok else wanted
            ok = (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and (value >= 0 if zero_ok else value > 0)
            )
        else:
            ok = True
        if not ok:
            raise ConfigError(
                f"invalid value {value!r}",
                path=source,
                key=f"{prefix}.{key}",
                fix="expected " + ("true or false" if isinstance(default, bool) else wanted),
            )
        values[key] = type(default)(value) if isinstance(default, int | float) else value
    return kind(**values)

"""Sandbox settings (``[sandbox]``, ``[sandbox.limits]``): limits and isolation, safe defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictStr

from codemode.config_model import (
    ConfigModel,
    Hint,
    PositiveNumber,
    PositiveWholeNumber,
    WholeNumber,
    validate_section,
)
from codemode.settings.egress import NetworkSettings

__all__ = ["ENFORCEABLE_LIMITS", "Limits", "NetworkSettings", "PackageSettings", "SandboxSettings"]

MiB = 1024 * 1024
GiB = 1024 * MiB
# Limits whose enforcement depends on the machine (see codemode.sandbox.enforcement).
ENFORCEABLE_LIMITS = ("memory", "cpu_time", "processes")
EnforceableLimit = Literal["memory", "cpu_time", "processes"]


class Limits(ConfigModel):
    """What one execution (and its sandbox) may use. Breaking one ends the execution."""

    wall_time_s: PositiveNumber = 60.0
    cpu_time_s: PositiveNumber = 120.0
    memory_bytes: PositiveWholeNumber = 2 * GiB
    processes: PositiveWholeNumber = 64
    open_files: PositiveWholeNumber = 256
    workspace_bytes: PositiveWholeNumber = 1 * GiB
    workspace_inodes: PositiveWholeNumber = 100_000
    tmp_bytes: PositiveWholeNumber = 256 * MiB
    # Awaitable tool calls (``await tool.aio(...)``) answered at once, per execution.
    parallel_calls: PositiveWholeNumber = 32
    output_kept_bytes: PositiveWholeNumber = 1 * MiB  # per stream, split between head and tail
    # What the result shows the model (characters).
    stdout_tail_chars: PositiveWholeNumber = 1_000
    stderr_head_chars: PositiveWholeNumber = 500
    stderr_tail_chars: PositiveWholeNumber = 1_500


class PackageSettings(ConfigModel):
    """``[sandbox.packages]``: what the host may install for the code, and from where.

    ``allow`` (when not empty) lists the packages the code may ask for; ``deny`` is refused
    whatever asked for it, dependencies included. Wheels only unless ``allow_sdist``: building
    a source distribution runs its code on the host.
    """

    enabled: StrictBool = False
    index_url: StrictStr = "https://pypi.org/simple"
    allow: Annotated[
        tuple[StrictStr, ...],
        Hint(expects="a list of package names", fix='write allow = ["requests", "numpy"]'),
    ] = ()
    deny: Annotated[
        tuple[StrictStr, ...],
        Hint(expects="a list of package names", fix='write deny = ["pip", "setuptools"]'),
    ] = ()
    allow_sdist: StrictBool = False
    # The most one install may add to the cache (all its files).
    max_bytes: PositiveWholeNumber = 200 * MiB
    # The most the cache's store may hold: past it, new installs are refused.
    max_cache_bytes: PositiveWholeNumber = 2048 * MiB
    # Where installed packages are kept (content-addressed); by default under the state dir.
    cache_dir: StrictStr | None = None
    install_timeout_s: PositiveNumber = 120.0


class SandboxSettings(ConfigModel):
    limits: Limits = Field(default_factory=Limits)
    packages: PackageSettings = Field(default_factory=PackageSettings)
    # No network unless [sandbox.network] allow lists "host:port" pairs (see docs/egress.md).
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    # Sandboxes started ahead of demand, so a new session does not wait for a container.
    pool_size: Annotated[WholeNumber, Field(ge=0)] = 2
    # While new sessions arrive fast the pool keeps up to pool_size_max ready (one per session
    # taken in the last 10 s), within pool_memory_mib; then it shrinks back to pool_size. A
    # ready sandbox forked from the template costs about 5 MiB: a burst of 20 new sessions
    # finds 20 ready, where 8 left 12 of them waiting for starts.
    pool_size_max: Annotated[WholeNumber, Field(ge=0)] = 32
    pool_memory_mib: Annotated[WholeNumber, Field(ge=0)] = 256
    # Threads starting sandboxes at once (each lives as long as the pool: die-with-parent).
    pool_starters: Annotated[WholeNumber, Field(ge=1)] = 4
    # Extra site-packages directories the agent's code may import from (read-only).
    # By default the interpreter codemode runs in (its virtualenv) is offered.
    python_paths: Annotated[
        tuple[StrictStr, ...] | None,
        Hint(expects="a list of directory paths", fix='write python_paths = ["/path/to/site"]'),
    ] = None
    # New sandboxes are forked from one template process, copy-on-write (idle ones share the
    # interpreter's pages; a start is a fork). false: each starts in a bubblewrap of its own.
    template: StrictBool = True
    # Running without isolation is for debugging trusted code only. The name says so.
    unsafe_no_isolation: StrictBool = False
    # Limits the machine cannot enforce (see sandbox.enforcement) that you accept anyway, by
    # name; only "processes" can be missing today (the host's root without writable cgroups).
    accept_unenforced_limits: Annotated[
        tuple[EnforceableLimit, ...],
        Hint(
            expects="a list of limit names",
            fix='write accept_unenforced_limits = ["processes"] (memory, cpu_time, processes)',
        ),
    ] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "config") -> SandboxSettings:
        """Build from a config table such as ``[sandbox]`` and ``[sandbox.limits]``."""
        return validate_section(cls, data, source=source, prefix="sandbox")

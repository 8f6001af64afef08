"""``codemode doctor``'s look at the configured servers' tools: which ones ask for approval
only because they declare no annotations, and the config lines that mark them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.cli.doctor_checks import Check

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig
    from codemode.tools import ToolSpec

__all__ = ["LOAD_TIMEOUT_S", "check_annotations"]

# Starting every server to list its tools; a server that takes longer is reported, not waited.
LOAD_TIMEOUT_S = 60.0


def check_annotations(config: CodemodeConfig) -> Check:
    import anyio

    from codemode.catalog.loading import catalog_from_config
    from codemode.policy.unannotated import (
        asking_unannotated,
        unannotated_fix,
        unannotated_summary,
    )

    async def listed() -> tuple[list[ToolSpec], dict[str, str]]:
        catalog = catalog_from_config(config)
        catalog.announce_unannotated = False  # doctor says it itself, on stdout
        try:
            with anyio.move_on_after(LOAD_TIMEOUT_S):
                await catalog.load()
            return catalog.specs(), dict(catalog.failures)
        finally:
            await catalog.aclose()

    specs, failures = anyio.run(listed)
    not_listed = f"; not listed (did not start): {', '.join(sorted(failures))}" if failures else ""
    asking = asking_unannotated(specs, config.policy)
    if not asking:
        return Check(
            "annotations",
            "ok",
            f"no tool asks for approval only for want of annotations ({len(specs)} tools)"
            + not_listed,
        )
    count = sum(len(tools) for tools, _total in asking.values())
    return Check(
        "annotations",
        "warn",
        f"{count} tools ask for approval on every call because they declare no annotations: "
        f"{unannotated_summary(asking)}{not_listed}",
        fix=unannotated_fix(asking),
    )

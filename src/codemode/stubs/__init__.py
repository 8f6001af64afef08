"""The generated, typed Python API: JSON Schema -> ``servers/<server>/<tool>.py`` modules."""

from __future__ import annotations

from codemode.stubs.package import ROOT_PACKAGE, StubLibrary
from codemode.stubs.render import (
    render_root_init,
    render_server_init,
    render_tool_module,
)

__all__ = [
    "ROOT_PACKAGE",
    "StubLibrary",
    "render_root_init",
    "render_server_init",
    "render_tool_module",
]

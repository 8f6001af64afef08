"""A session's workspace seen from the host: its files listed and read through the sandbox.

The host never opens the workspace itself (code can plant links there). A short host-written
program runs in the session's sandbox, reads without following links, and hands what it found
to the ``_workspace`` built-in server over the bridge; the host validates and bounds it.
"""

from codemode.files.access import (
    WORKSPACE_SERVER,
    WorkspaceEntry,
    WorkspaceFile,
    WorkspaceListing,
    list_workspace,
    read_workspace_file,
)
from codemode.files.tree import render_tree

__all__ = [
    "WORKSPACE_SERVER",
    "WorkspaceEntry",
    "WorkspaceFile",
    "WorkspaceListing",
    "list_workspace",
    "read_workspace_file",
    "render_tree",
]

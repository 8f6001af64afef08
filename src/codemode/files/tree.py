"""The workspace as a short indented tree, for a result."""

from __future__ import annotations

from codemode.files.access import WorkspaceListing

__all__ = ["render_tree"]


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def render_tree(listing: WorkspaceListing, *, max_lines: int = 40) -> str:
    """``name/`` for folders, ``name (12 B)`` for files, ``name -> (link)`` for links."""
    lines: list[str] = []
    shown = 0
    for entry in listing.entries:
        if "__pycache__" in entry.path.split("/"):
            continue
        shown += 1
        if len(lines) >= max_lines:
            continue
        depth = entry.path.count("/")
        name = entry.path.rsplit("/", 1)[-1]
        if entry.kind == "dir":
            label = f"{name}/"
        elif entry.kind == "link":
            label = f"{name} (link)"
        else:
            label = f"{name} ({_size(entry.size)})"
        lines.append("  " * depth + label)
    if shown > len(lines):
        lines.append(f"... {shown - len(lines)} more")
    elif listing.capped:
        lines.append("... (listing capped)")
    return "\n".join(lines)

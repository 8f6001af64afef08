"""The host side of workspace access: whatever the sandbox sends is checked and bounded."""

from __future__ import annotations

import pytest

from codemode.errors import ToolError, WorkspaceFileError
from codemode.files.access import (
    MAX_ENTRIES,
    WorkspaceListing,
    _Collector,
    check_path,
    mime_type,
)
from codemode.files.tree import render_tree
from codemode.tools import ToolCall


def _send(collector: _Collector, tool: str, **arguments: object) -> object:
    return collector.invoke(ToolCall("_workspace", tool, dict(arguments)), timeout_s=1)


@pytest.mark.parametrize(
    "path", ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a\0b", "x" * 600]
)
def test_paths_outside_or_malformed_are_refused(path: str) -> None:
    with pytest.raises(WorkspaceFileError):
        check_path(path)


def test_a_listing_keeps_only_well_formed_entries_and_sorts_them() -> None:
    collector = _Collector()
    _send(
        collector,
        "entries",
        entries=[
            ["b.txt", "file", 3],
            ["../../etc/passwd", "file", 10],
            ["/abs", "file", 1],
            ["a", "dir", 0],
            ["a/x.png", "file", 5],
            ["dev", "device", 0],
            ["neg", "file", -1],
            ["b.txt", "file", 3],
            "not a list",
            ["c", "link", 0],
        ],
        capped=False,
    )
    assert [(e.path, e.kind, e.size, e.mime) for e in collector.entries] == [
        ("a", "dir", 0, ""),
        ("a/x.png", "file", 5, "image/png"),
        ("b.txt", "file", 3, "text/plain"),
        ("c", "link", 0, ""),
    ]
    with pytest.raises(ToolError, match="not expected"):
        _send(collector, "entries", entries=[], capped=False)  # one listing per program


def test_a_listing_is_capped() -> None:
    collector = _Collector()
    _send(collector, "entries", entries=[[f"f{i}", "file", 1] for i in range(MAX_ENTRIES + 5)])
    assert len(collector.entries) == MAX_ENTRIES and collector.capped


def test_chunks_beyond_the_limit_or_not_bytes_are_refused() -> None:
    collector = _Collector(limit=10)
    _send(collector, "chunk", data=b"12345", size=100, last=False)
    with pytest.raises(ToolError, match="more data"):
        _send(collector, "chunk", data=b"123456", size=100, last=False)
    with pytest.raises(ToolError, match="bytes"):
        _send(collector, "chunk", data="text", size=100, last=False)
    _send(collector, "chunk", data=b"", size=100, last=True)
    with pytest.raises(ToolError, match="not expected"):
        _send(collector, "chunk", data=b"1", size=100, last=True)
    assert collector.chunks == [b"12345", b""] and collector.ended


def test_output_is_handed_out_in_chunks_until_empty() -> None:
    collector = _Collector(outgoing=b"x" * (300 * 1024))
    sizes = []
    while data := _send(collector, "output"):
        assert isinstance(data, bytes)
        sizes.append(len(data))
    assert sizes == [256 * 1024, 44 * 1024]


def test_mime_types_and_the_tree() -> None:
    assert (mime_type("result.md"), mime_type("a.csv"), mime_type("blob")) == (
        "text/markdown",
        "text/csv",
        "application/octet-stream",
    )
    collector = _Collector()
    entries = [["d", "dir", 0], *([f"d/f{i}.txt", "file", 2048] for i in range(5))]
    _send(collector, "entries", entries=entries, capped=False)
    listing_tree = render_tree(WorkspaceListing(collector.entries, False), max_lines=3)
    assert listing_tree.splitlines() == [
        "d/",
        "  f0.txt (2.0 KB)",
        "  f1.txt (2.0 KB)",
        "... 3 more",
    ]

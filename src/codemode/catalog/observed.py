"""Observed result shapes: what tools without an output schema really return, kept per catalog.

``ShapeRecorder`` is a wrapper in the session's invoker chain, placed outside the privacy
wrapper: it sees results as the sandbox receives them (personal data already tokenized) and
records only their shape (key names and types; see ``codemode.catalog.shapes``). Recording is
cheap: each tool's first ``first`` results are recorded, then one in ``every``; each recorded
result that changes nothing doubles that gap (up to ``max_every``), a change resets it.

``ShapeBook`` keeps the shapes, keyed by server, tool and a digest of the tool's definition (a
changed definition starts over), and stores them as JSON in the state directory when one
changes. The stubs ask it for a tool's text (``describe``); a new shape reaches the next stub
that is rendered for that tool.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codemode.bridge.host import ToolInvoker
from codemode.catalog.shapes import Shape, merge_shapes, render_shape, shape_of
from codemode.storage.private import private_dir
from codemode.tools import ToolCall, ToolSpec

__all__ = ["SHAPES_FILE", "ShapeBook", "ShapeRecorder"]

logger = logging.getLogger(__name__)

SHAPES_FILE = "observed_shapes.json"
_FILE_LIMIT = 8 * 1024 * 1024
_FORMAT = 1


def definition_digest(spec: ToolSpec) -> str:
    text = json.dumps([spec.description, spec.input_schema], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Sampling:
    """How often one tool's results are recorded."""

    __slots__ = ("gap", "next", "seen")

    def __init__(self, gap: int) -> None:
        self.seen = 0  # results so far
        self.next = 0  # the result to record next (after the first ones)
        self.gap = gap  # results between recorded ones


class ShapeBook:
    """The observed shapes of a catalog's tools (thread-safe; no ``path``: kept in memory)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        first: int = 16,
        every: int = 64,
        max_every: int = 4096,
    ) -> None:
        self.path = path
        self.first = first
        self.every = every
        self.max_every = max(max_every, every)
        self.revision = 0  # grows whenever a shape changes
        self._lock = threading.Lock()
        self._shapes: dict[tuple[str, str], tuple[str, Shape]] = {}  # -> (digest, shape)
        self._texts: dict[tuple[str, str], tuple[str, str]] = {}  # -> (digest, rendered)
        self._sampling: dict[tuple[str, str], _Sampling] = {}
        self._digests: dict[tuple[str, str], tuple[ToolSpec, str]] = {}
        if path is not None:
            self._load(path)

    def wants(self, server: str, tool: str) -> bool:
        """Whether the next result of this tool should be recorded (counts the call)."""
        sampling = self._sampling.get((server, tool))
        if sampling is None:
            sampling = self._sampling[(server, tool)] = _Sampling(self.every)
        sampling.seen += 1
        if sampling.seen <= self.first:
            return True
        if sampling.seen < sampling.next:
            return False
        sampling.next = sampling.seen + sampling.gap
        return True

    def observe(self, spec: ToolSpec, value: Any, *, scrub: Callable[[str], str] | None) -> bool:
        """Merge the shape of ``value`` into the tool's; True if it changed (and was saved)."""
        shape = shape_of(value, scrub=scrub)
        key = (spec.server, spec.name)
        digest = self._digest(spec)
        with self._lock:
            known = self._shapes.get(key)
            merged = shape if known is None or known[0] != digest else merge_shapes(known[1], shape)
            sampling = self._sampling.setdefault(key, _Sampling(self.every))
            if known is not None and known[0] == digest and merged == known[1]:
                sampling.gap = min(sampling.gap * 2, self.max_every)
                return False
            sampling.gap = self.every
            self._shapes[key] = (digest, merged)
            self._texts[key] = (digest, render_shape(merged))
            self.revision += 1
            snapshot = self._snapshot() if self.path is not None else None
        if snapshot is not None:
            self._save(snapshot)
        return True

    def describe(self, spec: ToolSpec) -> str | None:
        """The observed shape of the tool's results as text, if any was seen for this definition."""
        entry = self._texts.get((spec.server, spec.name))
        if entry is None or entry[0] != self._digest(spec):
            return None
        return entry[1]

    def _digest(self, spec: ToolSpec) -> str:
        key = (spec.server, spec.name)
        cached = self._digests.get(key)
        if cached is not None and cached[0] is spec:
            return cached[1]
        digest = definition_digest(spec)
        self._digests[key] = (spec, digest)
        return digest

    def _snapshot(self) -> dict[str, Any]:
        tools = [
            {"server": server, "tool": tool, "definition": digest, "shape": shape}
            for (server, tool), (digest, shape) in sorted(self._shapes.items())
        ]
        return {"format": _FORMAT, "tools": tools}

    def _save(self, snapshot: dict[str, Any]) -> None:
        assert self.path is not None
        try:
            private_dir(self.path.parent)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".shapes-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(snapshot, handle, separators=(",", ":"))
            Path(temporary).replace(self.path)
        except OSError as error:  # an optimisation: never a reason to fail a call
            logger.warning("could not store observed result shapes in %s: %s", self.path, error)

    def _load(self, path: Path) -> None:
        try:
            if not path.is_file() or path.stat().st_size > _FILE_LIMIT:
                return
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            logger.warning("ignoring unreadable observed shapes in %s: %s", path, error)
            return
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return
        for entry in data.get("tools", []):
            try:
                key = (str(entry["server"]), str(entry["tool"]))
                digest, shape = str(entry["definition"]), entry["shape"]
                text = render_shape(shape)
            except (KeyError, TypeError, AttributeError):
                continue
            self._shapes[key] = (digest, shape)
            self._texts[key] = (digest, text)


SpecLookup = Callable[[str, str], ToolSpec | None]


class ShapeRecorder:
    """A ``ToolInvoker`` wrapper recording the shape of results of tools with no output schema."""

    def __init__(
        self,
        inner: ToolInvoker,
        book: ShapeBook,
        specs: SpecLookup,
        *,
        scrub: Callable[[str], str] | None = None,
    ) -> None:
        self.inner = inner
        self.book = book
        self.specs = specs
        self.scrub = scrub

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        value = self.inner.invoke(call, timeout_s=timeout_s)
        if self.book.wants(call.server, call.tool):
            spec = self.specs(call.server, call.tool)
            if spec is not None and not spec.output_schema:
                try:
                    self.book.observe(spec, value, scrub=self.scrub)
                except Exception:  # recording must never fail a call
                    logger.exception("could not record the result shape of %s", spec.qualified_name)
        return value

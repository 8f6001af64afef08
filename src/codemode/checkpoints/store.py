"""A session's checkpoint and where it is kept: ``Checkpoint``, the ``CheckpointStore`` seam
and ``KVCheckpoints`` over any ``KeyValueStore`` (the state store by default; with replicas
the shared store, sealed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack

from codemode.state.store import KeyValueStore

__all__ = ["Checkpoint", "CheckpointStore", "KVCheckpoints"]


@dataclass(frozen=True)
class Checkpoint:
    owner: str
    taken_at: float
    archive: bytes = b""
    files: tuple[str, ...] = ()
    variables: dict[str, bytes] = field(default_factory=dict)
    # The installs the session made (each the requirements of one ``packages.install``).
    packages: tuple[tuple[str, ...], ...] = ()
    # The code's working directory, relative to the workspace ("": the workspace itself).
    cwd: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "variables": sorted(self.variables),
            "taken_at": self.taken_at,
        }


class CheckpointStore(Protocol):
    def put(self, handle: str, checkpoint: Checkpoint, *, expires_at: float) -> None: ...

    def get(self, handle: str) -> Checkpoint | None: ...

    def delete(self, handle: str) -> None: ...


class KVCheckpoints:
    """Checkpoints in any ``KeyValueStore`` (SQLite durable tier by default; a ``MemoryStore``
    for tests), one key per session, expiring with it."""

    def __init__(self, store: KeyValueStore) -> None:
        self.store = store

    def put(self, handle: str, checkpoint: Checkpoint, *, expires_at: float) -> None:
        data = msgpack.packb(
            {
                "owner": checkpoint.owner,
                "taken_at": checkpoint.taken_at,
                "archive": checkpoint.archive,
                "files": list(checkpoint.files),
                "variables": checkpoint.variables,
                "packages": [list(names) for names in checkpoint.packages],
                "cwd": checkpoint.cwd,
            },
            use_bin_type=True,
        )
        self.store.set(f"ckpt:{handle}", data, expires_at=expires_at)

    def get(self, handle: str) -> Checkpoint | None:
        found = self.store.get(f"ckpt:{handle}")
        if found is None:
            return None
        raw = msgpack.unpackb(found.data, raw=False)
        return Checkpoint(
            owner=raw["owner"],
            taken_at=raw["taken_at"],
            archive=raw["archive"],
            files=tuple(raw["files"]),
            variables=dict(raw["variables"]),
            packages=_installs(raw.get("packages")),
            cwd=raw.get("cwd") if isinstance(raw.get("cwd"), str) else "",
        )

    def delete(self, handle: str) -> None:
        self.store.delete(f"ckpt:{handle}")


def _installs(raw: object) -> tuple[tuple[str, ...], ...]:
    """The stored installs; a checkpoint from before they were kept has none."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        tuple(names)
        for names in raw
        if isinstance(names, list) and names and all(isinstance(n, str) for n in names)
    )

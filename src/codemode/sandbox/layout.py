"""Where things are inside every sandbox (paths the host and the guest agree on)."""

from __future__ import annotations

__all__ = ["EGRESS_SOCKET", "GUEST_PACKAGE", "GUEST_ROOT", "PACKAGES", "TMPFS_MOUNTS", "WORKSPACE"]

WORKSPACE = "/workspace"
# Private, size-limited tmpfs mounts: their pages are memory the sandbox holds.
TMPFS_MOUNTS = (WORKSPACE, "/tmp", "/dev/shm")
# The guest package and importable site directories are mounted under this neutral name.
GUEST_ROOT = "/run/codemode"
GUEST_PACKAGE = "_codemode_guest"
# The host's package store (read-only): each install is a directory ``PACKAGES/<digest>``.
PACKAGES = f"{GUEST_ROOT}/packages"
# The egress proxy's socket for this sandbox (only with [sandbox.network] allow).
EGRESS_SOCKET = f"{GUEST_ROOT}/egress.sock"

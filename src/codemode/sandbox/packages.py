"""Packages on demand: the host installs what the code asks for, never the sandbox.

``PackageInstaller.install(["requests"])`` checks the names against ``[sandbox.packages]``
(``allow``, ``deny``), runs uv on the host (wheels only unless ``allow_sdist``: building a source
distribution runs its code) into a staging directory, checks everything installed (``deny``
covers dependencies, ``max_bytes`` the total size), and moves it into a content-addressed store:
``<cache>/store/<sha256 of the files>``. A request seen before is answered from its ref without
running uv. The store is what a sandbox mounts read-only and puts on ``sys.path``.

uv's own download cache lives only as long as one install (beside its staging directory), so a
refused install (too big, a denied dependency) leaves nothing behind; the store is bounded by
``max_cache_bytes``: past it new installs are refused (entries in use by sandboxes are never
deleted under them). Every directory is the owner's only (0700).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from codemode.errors import PackageError, PackageNotAllowedError
from codemode.sandbox.layout import PACKAGES
from codemode.settings.sandbox import PackageSettings
from codemode.storage.private import private_write

__all__ = [
    "InstallReport",
    "PackageInstaller",
    "SandboxPackages",
    "cache_root",
    "normalize",
    "parse_requirement",
]

LOG_TAIL_CHARS = 1_500
_OPERATOR = r"(?:===|==|!=|~=|<=|>=|<|>)"
_VERSION = r"[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = re.compile(
    rf"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    rf"(?P<extras>\[[A-Za-z0-9._,-]+\])?"
    rf"(?P<spec>\s*{_OPERATOR}\s*{_VERSION}(?:\s*,\s*{_OPERATOR}\s*{_VERSION})*)?$"
)
_NO_WHEEL = ("no-build", "source distribution", "building source", "no wheels")


def normalize(name: str) -> str:
    """A package name as the index compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(text: str) -> tuple[str, str]:
    """``(normalized name, requirement)`` of a plain requirement such as ``requests>=2``.

    URLs, paths and options are refused: the code names packages, the config names the index.
    """
    match = _REQUIREMENT.match(text.strip())
    if match is None:
        raise PackageNotAllowedError(
            f"{text!r} is not a package requirement this sandbox installs",
            fix="ask for a package by name, optionally with a version: requests or requests>=2",
        )
    return normalize(match["name"]), text.strip().replace(" ", "")


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What an install made available: ``path`` goes on the code's ``sys.path``."""

    requested: tuple[str, ...]
    installed: tuple[tuple[str, str], ...]  # (name, version), dependencies included
    digest: str
    path: Path
    cached: bool
    log_tail: str

    def summary(self) -> str:
        names = ", ".join(f"{name} {version}" for name, version in self.installed)
        return f"installed {names}" + (" (cached)" if self.cached else "")


class PackageInstaller:
    """Installs packages into ``cache_root`` with the ``uv`` binary (found next to this Python
    or on PATH unless given). ``audit`` is called with every report, cached or not."""

    def __init__(
        self,
        settings: PackageSettings,
        cache_root: Path,
        *,
        uv: str | None = None,
        audit: Callable[[InstallReport], None] | None = None,
    ) -> None:
        self.settings = settings
        self.root = cache_root
        self.uv = uv or _find_uv()
        self.audit = audit
        for part in ("store", "refs", "staging"):
            (self.root / part).mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.root, *(self.root / part for part in ("store", "refs", "staging"))):
            with contextlib.suppress(OSError):  # tightened if an older version made it 0755
                folder.chmod(0o700)
        # Where older versions kept uv's cache for good: refused installs piled up there.
        shutil.rmtree(self.root / "uv-cache", ignore_errors=True)

    def install(self, requirements: Sequence[str]) -> InstallReport:
        if not requirements:
            raise PackageError("no package named", fix="name at least one package to install")
        parsed = [parse_requirement(text) for text in requirements]
        for name, _ in parsed:
            self._check(name, requested=True)
        specs = tuple(sorted({spec for _, spec in parsed}))
        key = self._key(specs)
        report = self._cached(key, specs)
        if report is None:
            report = self._install(key, specs)
        if self.audit is not None:
            self.audit(report)
        return report

    def _check(self, name: str, *, requested: bool) -> None:
        settings = self.settings
        if name in {normalize(denied) for denied in settings.deny}:
            what = "is" if requested else "(a dependency) is"
            raise PackageNotAllowedError(
                f"package {name!r} {what} denied by [sandbox.packages] deny",
                fix="do the task without it, or ask the operator to remove it from deny",
            )
        allowed = {normalize(allowed) for allowed in settings.allow}
        if requested and allowed and name not in allowed:
            raise PackageNotAllowedError(
                f"package {name!r} is not in [sandbox.packages] allow",
                fix=f"use one of: {', '.join(sorted(allowed))}; or ask the operator to allow it",
            )

    def _key(self, specs: tuple[str, ...]) -> str:
        material = {
            "index": self.settings.index_url,
            "specs": list(specs),
            "sdist": self.settings.allow_sdist,
            "python": sys.version_info[:2],
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]

    def _cached(self, key: str, specs: tuple[str, ...]) -> InstallReport | None:
        try:
            ref = json.loads((self.root / "refs" / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        path = self.root / "store" / str(ref.get("digest"))
        if not path.is_dir():
            return None
        installed = tuple((str(name), str(version)) for name, version in ref["installed"])
        for name, _ in installed:  # the config may have changed since
            self._check(name, requested=False)
        return InstallReport(specs, installed, path.name, path, True, "already in the cache")

    def _check_room(self, specs: tuple[str, ...]) -> None:
        held = _tree_bytes(self.root / "store")
        if held > self.settings.max_cache_bytes:
            raise PackageError(
                f"the package cache {self.root} holds {held:,} bytes, over the "
                f"{self.settings.max_cache_bytes:,} of [sandbox.packages] max_cache_bytes, so "
                f"{', '.join(specs)} was not installed",
                fix="ask the operator to empty the cache's store (with no sandbox running) or "
                "raise max_cache_bytes",
            )

    def _install(self, key: str, specs: tuple[str, ...]) -> InstallReport:
        self._check_room(specs)
        staging = Path(tempfile.mkdtemp(dir=self.root / "staging"))
        uv_cache = Path(tempfile.mkdtemp(dir=self.root / "staging", prefix="uv-cache-"))
        try:
            log = self._run_uv(staging, specs, uv_cache)
            installed = _installed(staging)
            for name, _ in installed:
                self._check(name, requested=False)
            digest, size = _digest(staging)
            if size > self.settings.max_bytes:
                raise PackageError(
                    f"{', '.join(specs)} would add {size} bytes, over the "
                    f"{self.settings.max_bytes} of [sandbox.packages] max_bytes",
                    fix="ask for a smaller package, or raise max_bytes",
                )
            path = self.root / "store" / digest
            with contextlib.suppress(OSError):
                staging.rename(path)  # taken already by a concurrent install: the same files
            if not path.is_dir():
                raise PackageError(
                    f"could not store {', '.join(specs)} in the package cache {self.root}",
                    fix="check that the cache directory is writable",
                )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(uv_cache, ignore_errors=True)
        ref = {"digest": digest, "installed": [list(item) for item in installed]}
        ref_path = self.root / "refs" / f"{key}.json"
        private_write(ref_path, json.dumps(ref).encode())
        return InstallReport(specs, installed, digest, path, False, log[-LOG_TAIL_CHARS:])

    def _run_uv(self, target: Path, specs: tuple[str, ...], uv_cache: Path) -> str:
        settings = self.settings
        command = [
            self.uv,
            "pip",
            "install",
            "--no-config",
            "--color",
            "never",
            "--python",
            sys.executable,
            "--target",
            str(target),
            "--index-url",
            settings.index_url,
            "--cache-dir",
            str(uv_cache),
        ]
        if not settings.allow_sdist:
            command.append("--no-build")
        command += ["--", *specs]
        env = {key: value for key, value in os.environ.items() if not key.startswith("UV_")}
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=settings.install_timeout_s,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise PackageError(
                f"installing {', '.join(specs)} took over {settings.install_timeout_s:g} s",
                fix="retry, or raise [sandbox.packages] install_timeout_s",
            ) from None
        log = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            tail = log[-LOG_TAIL_CHARS:]
            if not settings.allow_sdist and any(word in log.lower() for word in _NO_WHEEL):
                raise PackageError(
                    f"{', '.join(specs)}: no wheel fits, and source distributions are not "
                    f"built (building runs the package's code). uv said:\n{tail}",
                    fix="pick a version with a wheel, or set [sandbox.packages] allow_sdist",
                )
            raise PackageError(
                f"installing {', '.join(specs)} failed. uv said:\n{tail}",
                fix="check the package name and version against the index",
            )
        return log


class SandboxPackages:
    """The bridge's ``PackageProvider``: installs on the host, answers with the directory as
    the sandbox sees it (the store is mounted read-only at ``PACKAGES``)."""

    def __init__(self, installer: PackageInstaller) -> None:
        self.installer = installer

    def install(self, requirements: list[str], *, automatic: bool) -> dict[str, object]:
        if automatic:
            # An import that failed: only a package allowed by name, never a guess.
            allowed = {normalize(name) for name in self.installer.settings.allow}
            name = normalize(requirements[0]) if len(requirements) == 1 else ""
            if name not in allowed:
                raise PackageNotAllowedError(
                    f"No module named {requirements[0]!r} and it is not an allowed package",
                    fix="install it explicitly with packages.install([...]) if it is allowed",
                )
        report = self.installer.install(requirements)
        return {
            "path": f"{PACKAGES}/{report.digest}",
            "installed": [list(item) for item in report.installed],
            "cached": report.cached,
            "log_tail": report.log_tail,
        }


def cache_root(settings: PackageSettings) -> Path:
    """``cache_dir``, else ``$XDG_CACHE_HOME/codemode/packages`` or ``~/.cache/...``."""
    if settings.cache_dir:
        return Path(settings.cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "codemode" / "packages"


def _find_uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        raise PackageError(
            "uv is not installed, so packages cannot be installed on demand",
            fix="pip install 'codemode[packages]' (or uv), or turn [sandbox.packages] off",
        )
    return found


def _installed(target: Path) -> tuple[tuple[str, str], ...]:
    found = []
    for info in target.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found.append((normalize(name), version))
    return tuple(sorted(found))


def _tree_bytes(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
    return total


def _digest(root: Path) -> tuple[str, int]:
    """sha256 over every file's relative path and content, and the files' total size."""
    digest = hashlib.sha256()
    size = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        size += len(data)
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest(), size

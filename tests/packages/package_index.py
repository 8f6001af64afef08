"""Tiny wheels and sdists built by the tests, and a PEP 503 index folder to serve them."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path


def build_wheel(folder: Path, name: str, version: str, source: str, requires: str = "") -> Path:
    """A pure-Python wheel holding one module ``<name>.py`` with ``source``."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires:
        metadata += f"Requires-Dist: {requires}\n"
    files = {
        f"{module}.py": source,
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def build_sdist(folder: Path, name: str, version: str) -> Path:
    """A source distribution; building it would run its setup.py (which only says so)."""
    path = folder / f"{name}-{version}.tar.gz"
    members = {
        f"{name}-{version}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}/setup.py": "from setuptools import setup\nsetup()\n",
    }
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            entry = tarfile.TarInfo(member)
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    return path


class Index:
    """A PEP 503 simple index over a folder of distribution files."""

    def __init__(self, root: Path, url: str) -> None:
        self.root = root
        self.url = url
        self.files = root / "files"
        self.files.mkdir()

    def add(self, path: Path, project: str) -> None:
        page = self.root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = [
            f'<a href="../../files/{p.name}">{p.name}</a>'
            for p in sorted(self.files.iterdir())
            if p.name.split("-")[0].replace("_", "-") == project
        ]
        (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>")

"""The package cache is bounded and private: a refused install leaves no bytes behind (uv's
download cache included), the store refuses new installs past ``max_cache_bytes``, and every
directory is the owner's only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from package_index import Index, build_wheel

from codemode.errors import PackageError
from codemode.sandbox.packages import PackageInstaller
from codemode.settings.sandbox import PackageSettings


def publish_wheel(index: Index, name: str, version: str, source: str) -> None:
    build_wheel(index.files, name, version, source, "")
    index.add(index.files, name)


def cache_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def test_an_install_refused_for_size_leaves_nothing_in_the_cache(index, tmp_path) -> None:
    publish_wheel(index, "biglib", "1.0", "DATA = '" + "x" * 50_000 + "'\n")
    cache = tmp_path / "cache"
    packages = PackageInstaller(
        PackageSettings(enabled=True, index_url=index.url, max_bytes=1000), cache
    )
    with pytest.raises(PackageError, match="max_bytes"):
        packages.install(["biglib"])
    assert cache_bytes(cache) == 0, sorted(cache.rglob("*"))


def test_the_store_refuses_new_installs_past_its_bound(index, tmp_path) -> None:
    publish_wheel(index, "onelib", "1.0", "DATA = '" + "x" * 20_000 + "'\n")
    publish_wheel(index, "twolib", "1.0", "VALUE = 2\n")
    settings = PackageSettings(enabled=True, index_url=index.url, max_cache_bytes=10_000)
    packages = PackageInstaller(settings, tmp_path / "cache")
    first = packages.install(["onelib"])
    with pytest.raises(PackageError, match=r"over the 10,000 of \[sandbox.packages\] max_cache"):
        packages.install(["twolib"])
    assert packages.install(["onelib"]).path == first.path  # what is cached still serves


def test_the_cache_is_private_and_an_older_uv_cache_is_dropped(index, tmp_path) -> None:
    cache = tmp_path / "cache"
    (cache / "store").mkdir(parents=True, mode=0o755)
    (cache / "store").chmod(0o755)
    (cache / "uv-cache" / "wheels").mkdir(parents=True)
    (cache / "uv-cache" / "wheels" / "old.whl").write_bytes(b"x" * 1000)
    PackageInstaller(PackageSettings(enabled=True, index_url=index.url), cache)
    assert not (cache / "uv-cache").exists()
    for folder in (cache, cache / "store", cache / "refs", cache / "staging"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder

"""The host's package installer against a local index: uv, the allow and deny lists, no sdist
builds unless allowed, a content-addressed store, the log tail, the audit hook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from package_index import Index, build_sdist, build_wheel

from codemode.errors import PackageError, PackageNotAllowedError
from codemode.sandbox.packages import InstallReport, PackageInstaller, parse_requirement
from codemode.settings.sandbox import PackageSettings


def installer(index: Index, tmp_path: Path, **settings: object) -> tuple[PackageInstaller, list]:
    audited: list[InstallReport] = []
    config = PackageSettings(enabled=True, index_url=index.url, **settings)
    return PackageInstaller(config, tmp_path / "cache", audit=audited.append), audited


def publish_wheel(index: Index, name: str, version: str, source: str, requires: str = "") -> None:
    build_wheel(index.files, name, version, source, requires)
    index.add(index.files, name)


def test_an_allowed_package_installs_with_its_dependency_and_imports(index, tmp_path) -> None:
    publish_wheel(index, "tinylib", "1.0", "from tinydep import VALUE\n", requires="tinydep")
    publish_wheel(index, "tinydep", "2.0", "VALUE = 42\n")
    packages, audited = installer(index, tmp_path, allow=("tinylib",))

    report = packages.install(["tinylib"])

    assert report.installed == (("tinydep", "2.0"), ("tinylib", "1.0"))
    assert not report.cached
    assert "tinylib" in report.log_tail and "tinydep" in report.log_tail  # uv's own words
    assert report.path.parent == tmp_path / "cache" / "store" and report.path.name == report.digest
    imported = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]);import tinylib; print(tinylib.VALUE)",
            str(report.path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.strip() == "42"
    assert audited == [report]


def test_a_second_install_comes_from_the_cache_without_uv(index, tmp_path) -> None:
    publish_wheel(index, "tinylib", "1.0", "VALUE = 1\n")
    packages, audited = installer(index, tmp_path)
    first = packages.install(["tinylib==1.0"])
    packages.uv = "/nonexistent/uv"  # a cached request must not run it

    again = packages.install(["tinylib==1.0"])

    assert again.cached and again.path == first.path and again.installed == first.installed
    assert [report.cached for report in audited] == [False, True]


def test_a_denied_package_gets_a_clear_error(index, tmp_path) -> None:
    publish_wheel(index, "tinylib", "1.0", "VALUE = 1\n")
    packages, audited = installer(index, tmp_path, deny=("TinyLib",))
    with pytest.raises(
        PackageNotAllowedError, match=r"'tinylib' is denied by \[sandbox.packages\]"
    ):
        packages.install(["tinylib"])
    assert audited == []


def test_a_denied_dependency_fails_the_install_and_stores_nothing(index, tmp_path) -> None:
    publish_wheel(index, "tinylib", "1.0", "VALUE = 1\n", requires="tinydep")
    publish_wheel(index, "tinydep", "2.0", "VALUE = 42\n")
    packages, _ = installer(index, tmp_path, deny=("tinydep",))
    with pytest.raises(PackageNotAllowedError, match=r"'tinydep' \(a dependency\) is denied"):
        packages.install(["tinylib"])
    assert list((tmp_path / "cache" / "store").iterdir()) == []


def test_a_package_outside_the_allowlist_is_refused(index, tmp_path) -> None:
    packages, _ = installer(index, tmp_path, allow=("requests",))
    with pytest.raises(PackageNotAllowedError, match=r"not in \[sandbox.packages\] allow"):
        packages.install(["tinylib"])


def test_an_sdist_is_refused_unless_opted_in(index, tmp_path) -> None:
    build_sdist(index.files, "srconly", "1.0")
    index.add(index.files, "srconly")
    packages, _ = installer(index, tmp_path)
    with pytest.raises(PackageError, match="source distributions are not built") as refused:
        packages.install(["srconly"])
    assert "allow_sdist" in str(refused.value)


def test_the_size_cap_holds(index, tmp_path) -> None:
    publish_wheel(index, "biglib", "1.0", "DATA = '" + "x" * 5000 + "'\n")
    packages, _ = installer(index, tmp_path, max_bytes=1000)
    with pytest.raises(PackageError, match=r"over the 1000 of \[sandbox.packages\] max_bytes"):
        packages.install(["biglib"])


@pytest.mark.parametrize(
    "text",
    ["--index-url=http://evil", "git+https://example.com/x.git", "./local", "a b", "x @ http://y"],
)
def test_only_plain_requirements_are_accepted(text) -> None:
    with pytest.raises(PackageNotAllowedError, match="not a package requirement"):
        parse_requirement(text)


def test_plain_requirements_are_normalized() -> None:
    assert parse_requirement("Tiny_Lib>=1.0, <2") == ("tiny-lib", "Tiny_Lib>=1.0,<2")
    assert parse_requirement("pkg[extra]==1") == ("pkg", "pkg[extra]==1")

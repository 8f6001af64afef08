"""Packages on demand inside the real sandbox: the code asks (``pip install``, ``%pip``,
``packages.install``, or an import of an allowed package), the host installs from a local index,
the store is mounted read-only, and the result's output says what was installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from package_index import Index, build_sdist, build_wheel

from codemode.bridge.host import ToolAccess
from codemode.sandbox import BwrapBackend, SandboxPool, SandboxSession, SandboxSettings
from codemode.sandbox.packages import PackageInstaller, SandboxPackages
from codemode.settings.sandbox import PackageSettings


@pytest.fixture
def settings(index: Index, tmp_path: Path) -> PackageSettings:
    build_wheel(index.files, "tinylib", "1.0", "VALUE = 42\n")
    index.add(index.files, "tinylib")
    build_wheel(index.files, "otherlib", "1.0", "VALUE = 7\n")
    index.add(index.files, "otherlib")
    build_sdist(index.files, "srconly", "1.0")
    index.add(index.files, "srconly")
    return PackageSettings(
        enabled=True,
        index_url=index.url,
        allow=("tinylib", "srconly"),
        deny=("otherlib",),
        cache_dir=str(tmp_path / "packages"),
    )


@pytest.fixture
def session(settings: PackageSettings) -> Iterator[tuple[SandboxSession, ToolAccess]]:
    backend = BwrapBackend(SandboxSettings(packages=settings, pool_size=0))
    access = ToolAccess(
        packages=SandboxPackages(PackageInstaller(settings, Path(settings.cache_dir)))
    )
    with SandboxPool(backend, size=0) as pool:
        session = SandboxSession(pool)
        try:
            yield session, access
        finally:
            session.close()


@pytest.mark.parametrize(
    "line", ["pip install tinylib", "%pip install -q tinylib", "packages.install(['tinylib'])"]
)
def test_an_allowed_package_installs_and_imports(session, line) -> None:
    sandbox, access = session
    result = sandbox.execute(f"{line}\nimport tinylib\nprint('value', tinylib.VALUE)", tools=access)
    assert result.status == "ok", result.render_text()
    assert "[packages] installed tinylib 1.0" in result.stdout
    assert "value 42" in result.stdout


def test_the_install_log_tail_is_in_the_result(session) -> None:
    sandbox, access = session
    result = sandbox.execute("pip install tinylib", tools=access)
    assert result.status == "ok", result.render_text()
    assert "+ tinylib==1.0" in result.stdout  # uv's own line, from the log tail


def test_an_import_of_an_allowed_package_installs_it(session) -> None:
    sandbox, access = session
    result = sandbox.execute("import tinylib\nprint(tinylib.VALUE)", tools=access)
    assert result.status == "ok", result.render_text()
    assert result.stdout.strip() == "42"


def test_a_denied_package_gets_a_clear_error(session) -> None:
    sandbox, access = session
    result = sandbox.execute("pip install otherlib", tools=access)
    assert result.status == "error"
    assert result.error is not None and result.error["type"] == "PackageError"
    assert "'otherlib' is denied by [sandbox.packages] deny" in result.error["message"]
    imported = sandbox.execute("import otherlib", tools=access)  # not allowed: no install
    assert imported.error is not None and imported.error["type"] == "ModuleNotFoundError"


def test_an_sdist_is_refused(session) -> None:
    sandbox, access = session
    result = sandbox.execute("pip install srconly", tools=access)
    assert result.status == "error"
    assert "source distributions are not built" in result.error["message"]


def test_the_store_is_read_only_inside(session) -> None:
    sandbox, access = session
    result = sandbox.execute(
        "pip install tinylib\nimport tinylib, pathlib\n"
        "pathlib.Path(tinylib.__file__).write_text('VALUE = 0')",
        tools=access,
    )
    assert result.status == "error"
    assert result.error["type"] in ("OSError", "PermissionError")


def test_no_host_path_of_the_store_shows_in_mountinfo(session, settings: PackageSettings) -> None:
    """The store is an overlay of a neutral staging path: no line of mountinfo holds the cache
    directory or anything above it, and a package installed after the sandbox started (the
    install below) is still found through it."""
    sandbox, access = session
    store = (Path(str(settings.cache_dir)) / "store").resolve()
    host_paths = [str(store), str(store.parent)]
    result = sandbox.execute(
        "pip install -q tinylib\nimport tinylib\nprint(tinylib.VALUE)\n"
        "text = open('/proc/self/mountinfo').read()\n"
        "print([line.split()[3] for line in text.splitlines() if ' /run/codemode/packages ' in line])\n"
        f"print([path for path in {host_paths!r} if path in text])",
        tools=access,
    )
    assert result.status == "ok", result.render_text()
    assert result.stdout.splitlines()[-3:] == ["42", "['/']", "[]"], result.stdout

"""The library face: ``codemode.__all__`` is pinned; every name imports and is what it says."""

from __future__ import annotations

import inspect
from importlib.metadata import version
from pathlib import Path

import pytest

import codemode

PUBLIC = [
    "Codemode",
    "CodemodeConfig",
    "CodemodeError",
    "ConfigError",
    "ExecutionResult",
    "OutputCallback",
    "SandboxError",
    "SearchAnswer",
    "ServerConfig",
    "ToolError",
    "ToolSpec",
    "UsageError",
    "__version__",
    "load_config",
]


def test_all_is_pinned():
    assert sorted(codemode.__all__) == sorted(PUBLIC)
    assert len(set(codemode.__all__)) == len(codemode.__all__)


def test_every_exported_name_resolves_to_a_codemode_object():
    for name in codemode.__all__:
        member = getattr(codemode, name)
        if name == "__version__":
            continue
        if inspect.isclass(member) or inspect.isfunction(member):
            assert member.__module__.startswith("codemode."), name
            assert member.__name__ == name


def test_version_comes_from_the_package_metadata():
    assert codemode.__version__ == version("codemode")


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        codemode.NoSuchThing


def test_the_package_is_typed():
    assert (Path(codemode.__file__).parent / "py.typed").is_file()

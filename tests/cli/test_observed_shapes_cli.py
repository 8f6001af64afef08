"""``codemode stubs`` and ``codemode search --detail full`` show the result shapes the gateway
observed (stored in the state directory), as the gateway's own stubs and search do."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from codemode.catalog.observed import SHAPES_FILE, ShapeBook
from codemode.cli.main import main
from codemode.cli.options import load_specs

PET = {"id": 7, "name": "Rex", "tags": ["good"]}


@pytest.fixture
def config_with_shapes(tmp_path: Path, pets_spec: Path) -> Path:
    """A config whose state directory holds an observed shape for ``pets.list_pets``."""
    state = tmp_path / "state"
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[servers.pets]\nopenapi = "{pets_spec}"\n[gateway]\nstate_dir = "{state}"\n'
    )
    args = argparse.Namespace(config=config, openapi=[], allow_partial=False)
    (spec,) = load_specs(args)
    assert spec.output_schema is None  # the spec declares no response body
    assert state.is_dir()  # made by loading the config
    ShapeBook(state / SHAPES_FILE).observe(spec, [PET], scrub=None)  # as the gateway stores it
    return config


def _words(text: str) -> str:
    return " ".join(text.replace('"""', " ").split())


def test_stubs_show_the_observed_shape(
    config_with_shapes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["stubs", str(out), "--config", str(config_with_shapes)]) == 0
    source = (out / "servers" / "pets" / "list_pets.py").read_text()
    assert "Observed result shape" in source
    assert "list[{id: int, name: str, tags: list[str]}]" in _words(source)
    assert "Rex" not in source
    compile(source, "list_pets.py", "exec")


def test_search_at_full_detail_shows_the_observed_shape(
    config_with_shapes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        [
            "search",
            "list pets",
            "--detail",
            "full",
            "--no-semantic",
            "--config",
            str(config_with_shapes),
        ]
    )
    assert code == 0
    text = _words(capsys.readouterr().out)
    assert "Observed result shape" in text
    assert "list[{id: int, name: str, tags: list[str]}]" in text


def test_without_observations_nothing_is_claimed(
    tmp_path: Path, pets_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "codemode.toml"
    config.write_text(
        f'[servers.pets]\nopenapi = "{pets_spec}"\n[gateway]\nstate_dir = "{tmp_path / "s"}"\n'
    )
    assert main(["stubs", str(tmp_path / "out"), "--config", str(config)]) == 0
    source = (tmp_path / "out" / "servers" / "pets" / "list_pets.py").read_text()
    assert "Observed result shape" not in source

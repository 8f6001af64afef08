"""On the texts ``benchmarks/privacy.py`` times, the fast path finds exactly what the whole-text
scan finds (the same detections, markup included), with native anchors and without."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from codemode.privacy.detectors import Detection, DetectorSet
from codemode.privacy.fastscan import native_available

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "privacy.py"


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("privacy_benchmark", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    texts: dict[str, str] = _benchmark().texts_of()
    return texts


@pytest.fixture(scope="module")
def whole_text(texts: dict[str, str]) -> dict[str, tuple[Detection, ...]]:
    detectors = DetectorSet()
    detectors.use_fast_path(False)
    return {name: detectors._detect(text) for name, text in texts.items()}


@pytest.mark.parametrize("native", [True, False], ids=["native", "pure-python"])
@pytest.mark.parametrize("name", ["prose", "numeric", "clean", "orders", "contacts"])
def test_the_fast_path_finds_exactly_what_the_whole_text_scan_finds(
    texts: dict[str, str],
    whole_text: dict[str, tuple[Detection, ...]],
    name: str,
    native: bool,
) -> None:
    assert native_available(), "the dev extra installs hyperscan: both paths are tested"
    detectors = DetectorSet()
    detectors.use_native_anchors(native)
    assert detectors._fast_min <= len(texts[name])  # the fast path, not the whole-text scan
    assert detectors._detect(texts[name]) == whole_text[name]
    if name != "clean":
        assert whole_text[name], "the text has values to find"

"""Fixtures shared by the privacy tests."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.privacy.detectors import DetectorSet


@pytest.fixture
def detected_lengths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the detectors read from now on, in order."""
    read: list[int] = []
    detect = DetectorSet.detect

    def counted(self: DetectorSet, text: str, *args: Any, **kwargs: Any) -> Any:
        read.append(len(text))
        return detect(self, text, *args, **kwargs)

    monkeypatch.setattr(DetectorSet, "detect", counted)
    return read

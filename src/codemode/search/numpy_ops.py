"""The numpy forward pass's small pieces: GELU's erf, layer norm, mean pooling, unit rows,
padded batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = ["erf", "layer_norm", "padded", "pool", "unit_rows"]

_EPS = 1e-12


def erf(x: FloatArray) -> FloatArray:
    # Abramowitz & Stegun 7.1.26 (max error 1.5e-7); numpy has no erf and BERT's GELU needs it.
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    result: FloatArray = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return result


def layer_norm(x: Any, weight: FloatArray, bias: FloatArray) -> FloatArray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / (var + _EPS) ** 0.5 * weight + bias  # type: ignore[no-any-return]


def pool(x: FloatArray, mask: FloatArray) -> FloatArray:
    """The mean of each text's real token states, at unit length (sentence-transformers')."""
    import numpy as np

    summed = (x * mask[:, :, None]).sum(axis=1)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    return unit_rows(pooled)


def unit_rows(x: FloatArray) -> FloatArray:
    import numpy as np

    norms = np.linalg.norm(x, axis=1, keepdims=True)
    result: FloatArray = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return result


def padded(ids: Sequence[Sequence[int]], chunk: Sequence[int]) -> tuple[Any, FloatArray]:
    """``(token_ids, mask)`` of the texts ``chunk`` indexes in ``ids``, padded to the longest."""
    import numpy as np

    width = max(len(ids[i]) for i in chunk)
    token_ids = np.zeros((len(chunk), width), dtype=np.int64)
    mask = np.zeros((len(chunk), width), dtype=np.float32)
    for row, i in enumerate(chunk):
        token_ids[row, : len(ids[i])] = ids[i]
        mask[row, : len(ids[i])] = 1.0
    return token_ids, mask

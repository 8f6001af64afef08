"""The types the encoder's modules share: a leaf, so each imports them without the encoder (and
nothing here loads numpy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]

__all__ = [
    "BACKENDS",
    "PRECISIONS",
    "QUERY_PRECISIONS",
    "Backend",
    "FloatArray",
    "Precision",
    "QueryPrecision",
    "QuerySession",
]

# "auto": ONNX Runtime when it is installed and its graph loads, else numpy (said once).
Backend = Literal["auto", "numpy", "onnx"]
BACKENDS: tuple[Backend, ...] = ("auto", "numpy", "onnx")
# What ``encode_query`` (or ``encode_documents``) multiplies by on ONNX Runtime: 8-bit weights
# (the default) or float32.
Precision = Literal["int8", "float32"]
PRECISIONS: tuple[Precision, ...] = ("int8", "float32")
QueryPrecision = Precision
QUERY_PRECISIONS = PRECISIONS
# When the query session starts: with the encoder, or on the first query (a gateway that may
# never be searched does not hold ONNX Runtime until it is).
QuerySession = Literal["now", "first_query"]

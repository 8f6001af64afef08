"""The query graph with 8-bit weights: a query's pass reads a quarter of the bytes.

A short query's pass on ONNX Runtime is bound by reading the layers' 42 MB of float32 weights
for a handful of rows (83% of it in MatMul). Here those four matrices per layer are quantized
once, symmetrically, per block of ``BLOCK`` rows of each column (``round(w / s) + 128`` with
``s = max |w| / 127`` over the block), into one file of 11 MB beside the prepared float32
weights, and a second graph (``onnx_graph.build_model(..., int8=...)``) multiplies by them
with MatMulNBits, which quantizes the activations per block as well. The word and position
tables, biases, layer norms and attention stay float32, read from the float32 file as before.
Only queries run it (``MiniLMEncoder.encode_query``); tool texts have their own 8-bit graph
(``int8_documents``). Measured against the float32 graph over the benchmark's 334
queries: cosine at least 0.998 (median 0.999), recall unchanged on both splits, 2.9 against 5.9
ms for a short query (docs/search.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray
    from codemode.search.onnx_graph import Int8Matrix

__all__ = [
    "BLOCK",
    "INT8_FILE",
    "INT8_GRAPH_FILE",
    "QUANTIZED",
    "graph_path",
    "int8_graph_path",
    "quantize",
    "write_atomically",
]

# Bump both numbers whenever ``build_model`` or ``quantize`` changes: older files are then ignored.
INT8_GRAPH_FILE = "minilm-int8-v1.onnx"
INT8_FILE = "weights-int8-v1.bin"
QUANTIZED = ("qkv_w", "out_w", "up_w", "down_w")
# Rows per block. Measured on the dev queries: blocks of 32, 64 and 128 gave the same recall
# (cosine with float32 at least 0.9993, 0.998 and 0.998), 128 the fastest (2.9 ms a short query,
# 3.1 and 3.6 for 64 and 32).
BLOCK = 128


def quantize(matrix: FloatArray, block: int = BLOCK) -> tuple[bytes, bytes]:
    """``(data, scales)`` of a ``rows x columns`` float32 matrix in MatMulNBits' layout: uint8
    ``columns x rows/block x block`` and float32 ``columns x rows/block``, as bytes."""
    import numpy as np

    rows, columns = matrix.shape
    if rows % block:
        raise ValueError(f"{rows} rows do not split into blocks of {block}")
    blocks = np.ascontiguousarray(matrix.T).reshape(columns, rows // block, block)
    scales = (np.maximum(np.abs(blocks).max(axis=2), 1e-12) / 127.0).astype(np.float32)
    codes = np.clip(np.rint(blocks / scales[:, :, None]), -127, 127) + 128
    return codes.astype(np.uint8).tobytes(), scales.tobytes()


def int8_graph_path(prepared: Path, layers: int, heads: int) -> Path:
    """The 8-bit query graph in ``prepared``, written there with its weights file first when it
    is missing (each atomically; both are made from the float32 weights in ``prepared``, so
    concurrent writers write the same bytes)."""
    return graph_path(prepared, INT8_GRAPH_FILE, INT8_FILE, _layout, layers, heads)


def graph_path(
    prepared: Path,
    graph_file: str,
    weights_file: str,
    layout: Callable[[dict[str, FloatArray]], tuple[Mapping[str, Any], bytes]],
    layers: int,
    heads: int,
) -> Path:
    """An 8-bit graph in ``prepared`` (written first, with its weights file, when missing):
    ``layout`` quantizes the layers' matrices and places them in ``weights_file``."""
    path = prepared / graph_file
    if path.is_file():
        return path
    from codemode.search.onnx_graph import build_model, flat_npy_data
    from codemode.search.weights import mapped

    floats = mapped(prepared)
    matrices, content = layout(
        {f"{i}.{key}": floats[f"{i}.{key}"] for i in range(layers) for key in QUANTIZED}
    )
    write_atomically(prepared / weights_file, content)
    weights = flat_npy_data(prepared / "weights.npy", prepared / "layout.json")
    write_atomically(path, build_model(weights, layers, heads, int8=matrices).SerializeToString())
    return path


def _layout(matrices: dict[str, FloatArray]) -> tuple[dict[str, Int8Matrix], bytes]:
    """Each matrix's place in the one 8-bit weights file (its codes, then its scales), and the
    file's content."""
    from codemode.search.onnx_graph import Int8Matrix, NpyData

    places: dict[str, Int8Matrix] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, matrix in matrices.items():
        rows, columns = (int(n) for n in matrix.shape)
        data, scales = quantize(matrix)
        blocks = rows // BLOCK
        places[name] = Int8Matrix(
            data=NpyData(INT8_FILE, offset, (columns, blocks, BLOCK), "uint8"),
            scales=NpyData(INT8_FILE, offset + len(data), (columns, blocks)),
            rows=rows,
            columns=columns,
            block=BLOCK,
        )
        chunks += [data, scales]
        offset += len(data) + len(scales)
    return places, b"".join(chunks)


def write_atomically(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` through a file of this process renamed into place."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_bytes(content)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)

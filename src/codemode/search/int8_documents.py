"""The tool texts' graph with 8-bit arithmetic: a first index in about half the CPU time.

Embedding tool texts runs batches of about a thousand token rows, where the float32 matrix
products run near the cores' float32 peak: only narrower arithmetic makes them faster. Here the
layers' four weight matrices (``int8.QUANTIZED``) are quantized once, symmetrically, with one
scale per column (``round(w / s)``, ``s = max |w| / 127``), into one file beside the prepared
float32 weights, and a third graph multiplies them by DynamicQuantizeMatMul, which quantizes
each activation matrix to 8 bits with one scale and multiplies in integers (VNNI or AMX where
the CPU has them). The query graph's MatMulNBits blocks (``int8``) saved only a tenth of the
CPU on batches. Everything else stays float32, read from the float32 file.

Its vectors are not the float32 pass's (cosine over the three specs' 6,448 tool texts: median
0.9945, 1st percentile 0.989, min 0.973; the scale is the whole batch's, so a text's vector
depends on the texts batched with it, which are the same for the same list of texts), so they
are stored under keys of their own (``keys.INT8_DOCUMENTS``). Measured over
the benchmark's 3,224 operations: the default first answer unchanged, recall within one task on
both splits, a first index in 0.43 of the float32 graph's CPU (docs/search.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from codemode.search.int8 import graph_path

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray
    from codemode.search.onnx_graph import ColumnInt8Matrix

__all__ = ["DOCUMENTS_FILE", "DOCUMENTS_GRAPH_FILE", "documents_graph_path", "quantize_columns"]

# Bump both numbers whenever ``build_model`` or ``quantize_columns`` changes: older files are
# then ignored; bump ``keys.INT8_DOCUMENTS`` with them (stored vectors are keyed by it).
DOCUMENTS_GRAPH_FILE = "minilm-documents-int8-v1.onnx"
DOCUMENTS_FILE = "weights-int8-columns-v1.bin"


def quantize_columns(matrix: FloatArray) -> tuple[bytes, bytes]:
    """``(data, scales)`` of a ``rows x columns`` float32 matrix: int8 ``rows x columns`` and
    float32 ``columns``, as bytes."""
    import numpy as np

    scales = (np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / scales), -127, 127).astype(np.int8)
    return codes.tobytes(), scales.tobytes()


def documents_graph_path(prepared: Path, layers: int, heads: int) -> Path:
    """The tool texts' 8-bit graph in ``prepared``, written there with its weights file first
    when it is missing (each atomically, from the float32 weights in ``prepared``: concurrent
    writers write the same bytes)."""
    return graph_path(prepared, DOCUMENTS_GRAPH_FILE, DOCUMENTS_FILE, _layout, layers, heads)


def _layout(matrices: dict[str, FloatArray]) -> tuple[dict[str, ColumnInt8Matrix], bytes]:
    """Each matrix's place in the one weights file (its codes, then its scales), and the
    file's content."""
    from codemode.search.onnx_graph import ColumnInt8Matrix, NpyData

    places: dict[str, ColumnInt8Matrix] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, matrix in matrices.items():
        rows, columns = (int(n) for n in matrix.shape)
        data, scales = quantize_columns(matrix)
        places[name] = ColumnInt8Matrix(
            data=NpyData(DOCUMENTS_FILE, offset, (rows, columns), "int8"),
            scales=NpyData(DOCUMENTS_FILE, offset + len(data), (columns,)),
            columns=columns,
        )
        chunks += [data, scales]
        offset += len(data) + len(scales)
    return places, b"".join(chunks)

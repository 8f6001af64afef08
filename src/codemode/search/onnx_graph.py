"""The MiniLM forward pass as an ONNX graph over the prepared weights (no download, no torch).

``build_model`` writes the computation of ``MiniLMEncoder._hidden`` and ``numpy_ops.pool`` with
standard ONNX operators (opset 17: Gather, MatMul, Add, Softmax, LayerNormalization, Erf): inputs
``input_ids`` (int64, batch x width) and ``attention_mask`` (float32, batch x width), output
``embeddings`` (float32, batch x 384, unit rows). The matrices are not copied into the graph: each
initializer points at the data of a prepared ``.npy`` file in the same directory (ONNX "external
data"), so the graph file is about 16 kB and ONNX Runtime maps the weights instead of holding a
second copy (measured: a session in 65 ms and +50 MB, against 180 ms and +138 MB with the weights
inside the file). Only building needs the ``onnx`` package; running needs ``onnxruntime`` alone.

With ``int8=...`` the layers' four weight matrices are multiplied as 8-bit blocks instead
(``search/int8.py``: the query graph), or as 8-bit columns by 8-bit activations
(``search/int8_documents.py``: the tool texts' graph).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "OPSET",
    "ColumnInt8Matrix",
    "Int8Matrix",
    "NpyData",
    "build_model",
    "flat_npy_data",
    "npy_data",
]

OPSET = 17
_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class NpyData:
    """Where a file keeps an array: byte ``offset`` and ``shape`` (C order; float32, or uint8
    for the query graph's 8-bit matrices, int8 for the tool texts' graph's)."""

    file: str
    offset: int
    shape: tuple[int, ...]
    dtype: Literal["float32", "uint8", "int8"] = "float32"

    @property
    def length(self) -> int:
        return (4 if self.dtype == "float32" else 1) * math.prod(self.shape)


@dataclass(frozen=True, slots=True)
class Int8Matrix:
    """A ``rows x columns`` weight matrix in 8-bit blocks, as ONNX Runtime's MatMulNBits reads
    it: ``data`` (uint8, columns x blocks x ``block``) holds ``round(w / scale) + 128`` for each
    block of ``block`` rows of a column, ``scales`` (float32, columns x blocks) their scales."""

    data: NpyData
    scales: NpyData
    rows: int
    columns: int
    block: int


@dataclass(frozen=True, slots=True)
class ColumnInt8Matrix:
    """A ``rows x columns`` weight matrix as ONNX Runtime's DynamicQuantizeMatMul reads it:
    ``data`` (int8, rows x columns) holds ``round(w / scale)`` with one ``scale`` per column
    (``scales``, float32, columns)."""

    data: NpyData
    scales: NpyData
    columns: int


def npy_data(path: Path) -> NpyData:
    """The data of the ``.npy`` file at ``path``; ValueError unless it is C-ordered float32."""
    import numpy as np

    with path.open("rb") as handle:
        version = np.lib.format.read_magic(handle)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran_order, dtype = read_header(handle)
        offset = handle.tell()
    if fortran_order or dtype != np.dtype("<f4"):
        raise ValueError(f"{path} holds {dtype} in {'F' if fortran_order else 'C'} order")
    data = NpyData(path.name, offset, tuple(int(n) for n in shape))
    if path.stat().st_size < offset + data.length:
        raise ValueError(f"{path} is shorter than its header says")
    return data


def flat_npy_data(path: Path, layout_path: Path) -> dict[str, NpyData]:
    """Where each matrix lies in the one flat ``.npy`` file of the prepared weights
    (``weights._store_flat``): ``layout_path`` maps names to (element offset, shape)."""
    import json

    whole = npy_data(path)
    out: dict[str, NpyData] = {}
    for name, (start, shape) in json.loads(layout_path.read_text()).items():
        data = NpyData(path.name, whole.offset + 4 * int(start), tuple(int(n) for n in shape))
        if 4 * int(start) + data.length > whole.length:
            raise ValueError(f"{path} is shorter than its layout says for {name}")
        out[name] = data
    return out


class _Graph:
    """Collects nodes and initializers; names are generated so each node's output is unique."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def constant(self, name: str, array: Any) -> str:
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name

    def external(self, name: str, data: NpyData) -> str:
        from onnx import TensorProto

        kinds = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8}
        kind = kinds[data.dtype]
        tensor = TensorProto(name=name, data_type=kind, dims=data.shape)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", data.file),
            ("offset", data.offset),
            ("length", data.length),
        ):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        self.initializers.append(tensor)
        return name

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        self._count += 1
        output = f"{kind.lower()}_{self._count}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def int8_matmul(self, x: str, name: str, weight: Int8Matrix) -> str:
        """``x @ weight`` by MatMulNBits (ONNX Runtime's com.microsoft domain), 8 bits, symmetric
        (no zero points: 128 is the default), ``accuracy_level`` 4: the activations are quantized
        per block too and multiplied in integers (level 0, float32 arithmetic over the dequantized
        blocks, measured 22 ms a short query against 5 on float32 weights)."""
        data = self.external(f"{name}_q8", weight.data)
        scales = self.external(f"{name}_scales", weight.scales)
        self._count += 1
        output = f"matmulnbits_{self._count}"
        self.nodes.append(
            self.helper.make_node(
                "MatMulNBits",
                [x, data, scales],
                [output],
                domain="com.microsoft",
                K=weight.rows,
                N=weight.columns,
                bits=8,
                block_size=weight.block,
                accuracy_level=4,
            )
        )
        return output

    def dynamic_int8_matmul(self, x: str, name: str, weight: ColumnInt8Matrix) -> str:
        """``x @ weight`` by DynamicQuantizeMatMul (com.microsoft): ``x`` quantized to 8 bits
        with one scale for the whole tensor, multiplied in integers (VNNI or AMX where the CPU
        has them), then scaled back per column. Measured on 400 tool texts in batches of 32,
        0.37 to 0.43 of the float32 graph's CPU; per-row activation scales (MatMulInteger and
        nine elementwise operators) 0.55 to 0.66; MatMulNBits' blocks 0.89 (docs/search.md)."""
        data = self.external(f"{name}_i8", weight.data)
        scales = self.external(f"{name}_column_scales", weight.scales)
        self._count += 1
        output = f"dynamicquantizematmul_{self._count}"
        self.nodes.append(
            self.helper.make_node(
                "DynamicQuantizeMatMul", [x, data, scales], [output], domain="com.microsoft"
            )
        )
        return output


def build_model(
    weights: Mapping[str, NpyData],
    layers: int,
    heads: int,
    int8: Mapping[str, Int8Matrix | ColumnInt8Matrix] | None = None,
) -> Any:
    """The ``onnx.ModelProto`` of the encoder over ``weights``, the prepared files by array name
    (``weights._read_weights``); save it in the directory that holds them. ``int8``, by the same
    names (the layers' ``qkv_w``, ``out_w``, ``up_w``, ``down_w``): matrices multiplied in 8-bit
    blocks in place of those float32 ones, which the graph then does not name."""
    import numpy as np
    from onnx import TensorProto, helper

    g = _Graph()
    quantized: Mapping[str, Int8Matrix | ColumnInt8Matrix] = int8 or {}
    dim = weights["emb_ln_w"].shape[0]
    head_dim = dim // heads
    i64 = np.int64
    ids, mask = "input_ids", "attention_mask"

    word = g.external("word", weights["word"])
    position = g.external("position", weights["position"])
    zero = g.constant("zero", np.array([0], dtype=i64))
    one = g.constant("one", np.array([1], dtype=i64))
    width = g.op("Slice", g.op("Shape", ids), one, g.constant("two", np.array([2], dtype=i64)))
    x = g.op("Add", g.op("Gather", word, ids), g.op("Slice", position, zero, width, zero))
    x = g.op("LayerNormalization", x, g.external("emb_ln_w", weights["emb_ln_w"]),
             g.external("emb_ln_b", weights["emb_ln_b"]), axis=-1, epsilon=_EPS)  # fmt: skip

    # (1 - mask) * -1e9, shaped batch x 1 x 1 x width, added to every head's scores.
    one_f = g.constant("one_f", np.array(1.0, dtype=np.float32))
    big = g.constant("minus_big", np.array(-1e9, dtype=np.float32))
    bias = g.op("Mul", g.op("Sub", one_f, mask), big)
    bias = g.op("Unsqueeze", bias, g.constant("axes_1_2", np.array([1, 2], dtype=i64)))
    scale = g.constant("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    split_heads = g.constant("split_heads", np.array([0, 0, heads, head_dim], dtype=i64))
    merge_heads = g.constant("merge_heads", np.array([0, 0, dim], dtype=i64))
    thirds = g.constant("thirds", np.array([dim, dim, dim], dtype=i64))
    half = g.constant("half", np.array(0.5, dtype=np.float32))
    # x / sqrt(2) rather than x * sqrt(1/2): ORT fuses this form of GELU (BiasGelu).
    sqrt_two = g.constant("sqrt_two", np.array(math.sqrt(2.0), dtype=np.float32))

    for i in range(layers):
        prefix = f"{i}."
        c = {
            name.removeprefix(prefix): g.external(name, data)
            for name, data in weights.items()
            if name.startswith(prefix) and name not in quantized
        }

        def matmul(x: str, key: str, prefix: str = prefix, c: dict[str, str] = c) -> str:
            weight = quantized.get(prefix + key)
            if isinstance(weight, ColumnInt8Matrix):
                return g.dynamic_int8_matmul(x, prefix + key, weight)
            if weight is not None:
                return g.int8_matmul(x, prefix + key, weight)
            return g.op("MatMul", x, c[key])

        qkv = g.op("Add", matmul(x, "qkv_w"), c["qkv_b"])
        g.nodes.append(
            helper.make_node("Split", [qkv, thirds], [f"q{i}", f"k{i}", f"v{i}"], axis=-1)
        )
        q = g.op("Transpose", g.op("Reshape", f"q{i}", split_heads), perm=[0, 2, 1, 3])
        k = g.op("Transpose", g.op("Reshape", f"k{i}", split_heads), perm=[0, 2, 3, 1])
        v = g.op("Transpose", g.op("Reshape", f"v{i}", split_heads), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = g.op("Add", matmul(context, "out_w"), c["out_b"])
        x = g.op("LayerNormalization", g.op("Add", attended, x), c["ln1_w"], c["ln1_b"],
                 axis=-1, epsilon=_EPS)  # fmt: skip
        up = g.op("Add", matmul(x, "up_w"), c["up_b"])
        erf = g.op("Erf", g.op("Div", up, sqrt_two))
        gelu = g.op("Mul", g.op("Mul", up, half), g.op("Add", erf, one_f))
        down = g.op("Add", matmul(gelu, "down_w"), c["down_b"])
        x = g.op("LayerNormalization", g.op("Add", down, x), c["ln2_w"], c["ln2_b"],
                 axis=-1, epsilon=_EPS)  # fmt: skip

    # Mean over the real tokens, then unit length (the numpy path's ``numpy_ops.pool``).
    weights_3d = g.op("Unsqueeze", mask, g.constant("axis_2", np.array([2], dtype=i64)))
    summed = g.op("ReduceSum", g.op("Mul", x, weights_3d), one, keepdims=0)
    count = g.op("ReduceSum", mask, one, keepdims=1)
    tiny = g.constant("tiny", np.array(1e-9, dtype=np.float32))
    pooled = g.op("Div", summed, g.op("Max", count, tiny))
    norm = g.op("ReduceL2", pooled, axes=[1], keepdims=1)  # axes an input only from opset 18
    floor = g.constant("floor", np.array(1e-12, dtype=np.float32))
    g.nodes.append(helper.make_node("Div", [pooled, g.op("Max", norm, floor)], ["embeddings"]))

    graph = helper.make_graph(
        g.nodes,
        "minilm",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "width"]),
            helper.make_tensor_value_info(mask, TensorProto.FLOAT, ["batch", "width"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", dim])],
        g.initializers,
    )
    opsets = [helper.make_opsetid("", OPSET)]
    if quantized:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8  # what opset 17 came with: older runtimes read it too
    return model

"""The encoder's pooled forward pass on ONNX Runtime: the numpy pass's vectors, about twice as fast.

The graph (``onnx_graph.build_model``) is written once into the directory of the prepared
weights (``weights.prepared_weights``), beside the flat ``.npy`` file it points into, and loaded
from there by every later process: building it needs the ``onnx`` package, running it
``onnxruntime`` only.
Measured on this project's 2-core machines, one thread: 4.6 ms against 9.0 ms for a short query,
8.7 against 14.4 ms for a 27-token one, and 1.6 times the numpy pass's throughput on documents.
``start_int8`` starts the query's graph with 8-bit weights (``search/int8.py``) the same way,
``start_documents_int8`` the tool texts' (``search/int8_documents.py``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.errors import RuntimeFailure, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from codemode.search.arrays import Backend, FloatArray

__all__ = [
    "DocumentsGraphError",
    "GRAPH_FILE",
    "OnnxForward",
    "graph_path",
    "documents_int8_pass",
    "return_freed_memory",
    "start_documents_int8",
    "start_int8",
    "start_onnx",
    "warn_documents_float32",
    "warn_float32",
    "warn_numpy",
]

log = logging.getLogger("codemode.search")
_warned: list[bool] = []
_warned_int8: list[bool] = []
_warned_documents: list[bool] = []

# Bump the number whenever ``build_model`` changes: a graph file of an older build is then ignored.
GRAPH_FILE = "minilm-v2.onnx"


def graph_path(prepared: Path, layers: int, heads: int) -> Path:
    """The graph file in ``prepared``, written there first when it is missing (atomically)."""
    path = prepared / GRAPH_FILE
    if path.is_file():
        return path
    from codemode.search.onnx_graph import build_model, flat_npy_data

    weights = flat_npy_data(prepared / "weights.npy", prepared / "layout.json")
    model = build_model(weights, layers, heads)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_bytes(model.SerializeToString())
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


class OnnxForward:
    """``(token_ids, mask) -> unit vectors`` (batch x 384) by an ONNX Runtime session."""

    def __init__(self, path: Path, *, threads: int | None) -> None:
        import onnxruntime

        self.path = path
        options = onnxruntime.SessionOptions()
        # One thread per query by default, as for numpy's BLAS (``blas.blas_threads``).
        options.intra_op_num_threads = threads or 0
        if threads != 1:
            # Waiting workers sleep instead of spinning: the machine is shared (same speed here).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # its notes about unused initializers are not for users
        self._session: Any = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, token_ids: Any, mask: FloatArray) -> FloatArray:
        import numpy as np

        feed = {"input_ids": token_ids, "attention_mask": mask}
        result: FloatArray = np.asarray(self._session.run(["embeddings"], feed)[0], np.float32)
        return result


def return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). A stopped session's tens of MB stay in the process otherwise: measured, 55 MB
    held after a session was stopped, 9 MB once trimmed."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def start_onnx(
    prepared: Path | None, threads: int | None, backend: Backend, *, layers: int, heads: int
) -> OnnxForward | None:
    """The ONNX Runtime pass over the weights prepared in ``prepared``, or None (numpy then runs;
    for ``backend="auto"``: a failure other than a missing onnxruntime is logged once). With
    ``backend="onnx"`` every failure raises ``UsageError``."""
    try:
        import onnxruntime  # noqa: F401 - the one optional part whose absence is not a failure
    except ImportError as error:
        if backend == "onnx":
            raise UsageError(
                f"the onnx encoder backend needs onnxruntime ({error})",
                fix="pip install 'codemode[semantic]', or pass backend='numpy'",
            ) from error
        return None
    if prepared is None:  # the graph points at the prepared weights: no cache, no graph
        if backend == "onnx":
            raise UsageError(
                "the onnx encoder backend needs a cache directory (none given, or not writable)",
                fix="pass a writable cache_dir, or pass backend='numpy'",
            )
        return None
    try:
        return OnnxForward(graph_path(prepared, layers, heads), threads=threads)
    except Exception as error:  # a broken optional backend must not stop search
        if backend == "onnx":
            raise UsageError(
                f"the onnx encoder backend could not start: {error}",
                fix="pip install 'codemode[semantic]' (it brings onnx, which builds the graph), "
                "or pass backend='numpy'",
            ) from error
        warn_numpy("ONNX Runtime could not start", error)
        return None


def start_int8(
    prepared: Path | None, threads: int | None, *, layers: int, heads: int
) -> OnnxForward | None:
    """The query's pass with 8-bit weights (``int8.int8_graph_path``), or None: without
    onnxruntime or a prepared directory silently (the float32 start says what is missing), else
    with one warning per process (queries are then embedded in float32)."""
    if prepared is None:
        return None
    try:
        import onnxruntime  # noqa: F401 - its absence is reported by the float32 start
    except ImportError:
        return None
    try:
        from codemode.search.int8 import int8_graph_path

        return OnnxForward(int8_graph_path(prepared, layers, heads), threads=threads)
    except Exception as error:  # noqa: BLE001 - the float32 pass answers instead
        warn_float32("the int8 query graph could not start", error)
        return None


def start_documents_int8(
    prepared: Path, threads: int | None, *, layers: int, heads: int
) -> OnnxForward:
    """The tool texts' pass with 8-bit arithmetic (``int8_documents.documents_graph_path``);
    raises whatever building or loading it raised."""
    from codemode.search.int8_documents import documents_graph_path

    return OnnxForward(documents_graph_path(prepared, layers, heads), threads=threads)


class DocumentsGraphError(RuntimeFailure):
    """The tool texts' 8-bit graph could not start or run (``encode_documents`` catches it and
    embeds in float32)."""

    code = "documents_graph_failed"

    def __init__(self, error: Exception) -> None:
        super().__init__(
            f"the int8 tool texts' graph failed ({type(error).__name__}: {error})",
            fix="pass document_precision='float32', or reinstall codemode[semantic]",
        )
        self.error = error


def documents_int8_pass(
    prepared: Path, threads: int | None, *, layers: int, heads: int
) -> Callable[[Any, FloatArray], FloatArray]:
    """``start_documents_int8``'s pass, every failure of it (at start or in a batch) raised as
    ``DocumentsGraphError``: what else fails in a call (a progress callback) passes through."""
    try:
        session = start_documents_int8(prepared, threads, layers=layers, heads=heads)
    except Exception as error:
        raise DocumentsGraphError(error) from error

    def forward(token_ids: Any, mask: FloatArray) -> FloatArray:
        try:
            return session(token_ids, mask)
        except Exception as error:
            raise DocumentsGraphError(error) from error

    return forward


def warn_documents_float32(what: str, error: Exception) -> None:
    """Log, once per process, that tool texts are embedded in float32 because their 8-bit graph
    failed (``MiniLMEncoder(document_precision="float32")`` silences it)."""
    if not _warned_documents:
        _warned_documents.append(True)
        log.warning(
            "%s (%s: %s); embedding tool texts in float32 instead (about twice as slow); "
            "pass document_precision='float32' to choose that",
            what,
            type(error).__name__,
            error,
        )


def warn_float32(what: str, error: Exception) -> None:
    """Log, once per process, that queries are embedded in float32 because the int8 graph
    failed (``MiniLMEncoder(query_precision="float32")`` silences it)."""
    if not _warned_int8:
        _warned_int8.append(True)
        log.warning(
            "%s (%s: %s); embedding queries in float32 instead (about twice as slow); "
            "pass query_precision='float32' to choose that",
            what,
            type(error).__name__,
            error,
        )


def warn_numpy(what: str, error: Exception) -> None:
    """Log, once per process, that numpy embeds because ONNX Runtime failed."""
    if not _warned:
        _warned.append(True)
        log.warning("%s (%s: %s); embedding with numpy instead", what, type(error).__name__, error)

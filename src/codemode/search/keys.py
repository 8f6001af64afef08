"""What embedded vectors are stored under: the model that made them and the views they average."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from codemode.search.encoder import MODEL_ID

if TYPE_CHECKING:
    from codemode.search.encoder import MiniLMEncoder

__all__ = ["model_key", "model_key_for", "vectors_key"]


def model_key(encoder: MiniLMEncoder) -> str:
    """What vectors made by ``encoder`` are stored under: the model, its variant when it is not
    the pinned one, and the token limit."""
    return model_key_for(encoder.max_length, encoder.variant)


def model_key_for(max_length: int, variant: str) -> str:
    return f"{MODEL_ID}-{max_length}" + (f"-{variant}" if variant else "")


def vectors_key(model_key: str, views: Sequence[int]) -> str:
    """What a stored index's tool vectors are stored under: the model (``model_key``) and the
    views they average, so vectors made another way are never read as these."""
    return f"{model_key}-view{'+'.join(str(view) for view in views)}"

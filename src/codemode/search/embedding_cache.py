"""The per-text embedding cache: the vectors of a list of texts, one ``.npy`` file per list."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.storage.private import private_dir, private_open

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = ["EmbeddingCache"]

log = logging.getLogger("codemode.search")


class EmbeddingCache:
    """Vectors of a list of texts in ``<dir>/embeddings/``, one ``.npy`` file per list, keyed by
    the model and the texts. Lists that could not be written are kept in memory instead, so a
    staged build on a read-only home still embeds each view once."""

    def __init__(self, directory: Path, model_key: str) -> None:
        self.directory = directory / "embeddings"
        self.model_key = model_key
        self._unsaved: dict[Path, FloatArray] = {}

    def path_for(self, texts: Sequence[str]) -> Path:
        digest = hashlib.sha256(self.model_key.encode())
        for text in texts:
            digest.update(text.encode())
            digest.update(b"\0")
        return self.directory / f"{self.model_key}-{digest.hexdigest()[:32]}.npy"

    def load(self, texts: Sequence[str]) -> FloatArray | None:
        import numpy as np

        path = self.path_for(texts)
        vectors: FloatArray | None = self._unsaved.get(path)
        if vectors is None:
            try:
                vectors = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                return None
        return vectors if vectors is not None and vectors.shape[0] == len(texts) else None

    def store(self, texts: Sequence[str], vectors: FloatArray) -> None:
        import numpy as np

        path = self.path_for(texts)
        try:
            private_dir(self.directory)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            with private_open(partial) as handle:
                np.save(handle, vectors, allow_pickle=False)
            partial.replace(path)
        except OSError as error:  # a read-only home only costs speed next time
            log.warning("could not cache embeddings in %s: %s", self.directory, error)
            self._unsaved[path] = vectors

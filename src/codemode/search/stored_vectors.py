"""Tool vectors stored on disk, mapped on the first search rather than when the index opens.

A gateway opens its stored index at start-up. Mapping the vectors then imported numpy and its
BLAS (about 12 MiB of the gateway's memory, and 80 ms of CPU) in every gateway, searched or
not. ``stored_vectors`` checks the file from its header alone (a ``.npy`` header is a short
Python literal: the element type, the order and the shape), so an index with vectors of the
wrong shape is still a miss at once; ``StoredVectors.load`` maps them when a search needs
them. A file that goes missing or turns bad in between reads as vectors of zeros (the search
then ranks lexically) and says so once.
"""

from __future__ import annotations

import ast
import logging
import struct
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.search.arrays import FloatArray

__all__ = ["StoredVectors", "npy_header", "stored_vectors"]

log = logging.getLogger("codemode.search")

_MAGIC = b"\x93NUMPY"
# A header is padded to a multiple of 64 bytes; a few hundred cover any 2-D array's.
_HEADER_MAX = 4096
# How ``np.save`` writes this machine's float32 (what ``np.load`` then reads as np.float32).
_FLOAT32 = "<f4" if sys.byteorder == "little" else ">f4"


def npy_header(path: Path) -> dict[str, object] | None:
    """The header of the ``.npy`` file at ``path`` (``descr``, ``fortran_order``, ``shape``),
    or None when it is not one (or cannot be read)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(12)
            if len(head) < 10 or not head.startswith(_MAGIC):
                return None
            major = head[6]
            if major == 1:
                (length,), start = struct.unpack("<H", head[8:10]), 10
            elif major in (2, 3) and len(head) == 12:
                (length,), start = struct.unpack("<I", head[8:12]), 12
            else:
                return None
            if length > _HEADER_MAX:
                return None
            handle.seek(start)
            text = handle.read(length).decode("latin-1" if major < 3 else "utf-8")
        header = ast.literal_eval(text)
    except (OSError, ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        return None
    return header if isinstance(header, dict) else None


class StoredVectors:
    """Vectors of ``rows`` x ``columns`` float32 at ``path``, mapped by the first ``load``."""

    def __init__(self, path: Path, rows: int, columns: int) -> None:
        self.path, self.rows, self.columns = path, rows, columns
        self._loaded: FloatArray | None = None
        self._lock = threading.Lock()

    def load(self) -> FloatArray:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._map()
            return self._loaded

    def _map(self) -> FloatArray:
        import numpy as np

        try:
            mapped = np.load(self.path, mmap_mode="r", allow_pickle=False)
            # A plain array over the mapped pages: numpy's memmap subclass makes each product
            # slower.
            vectors: FloatArray = np.asarray(mapped)
            if vectors.shape == (self.rows, self.columns) and vectors.dtype == np.float32:
                return vectors
            problem = f"holds an array of shape {vectors.shape}, not ({self.rows}, {self.columns})"
        except (OSError, ValueError) as error:
            problem = f"could not be read as an array ({type(error).__name__})"
        log.warning(
            "the stored search vectors %s %s since the index opened: searches rank by words "
            "alone until the gateway restarts (it then builds them again)",
            self.path,
            problem,
        )
        return np.zeros((self.rows, self.columns), dtype=np.float32)


def stored_vectors(path: Path, rows: int) -> StoredVectors | None:
    """The vectors at ``path`` if its header says ``rows`` float32 rows in C order, else None."""
    header = npy_header(path)
    if header is None:
        return None
    shape, descr = header.get("shape"), header.get("descr")
    if header.get("fortran_order") is not False or descr != _FLOAT32:
        return None
    if not (isinstance(shape, tuple) and len(shape) == 2 and shape[0] == rows):
        return None
    columns = shape[1]
    return StoredVectors(path, rows, columns) if isinstance(columns, int) and columns > 0 else None

"""How many threads numpy's BLAS runs for the encoder: one per query.

The model's matrices are small: on this project's 2-core machines one thread was faster than two
(8 ms against 35 ms per query while another process used a core), and OpenBLAS's thread per core
at import cost a one-query process about 70 ms of CPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["blas_threads", "import_numpy_single_threaded", "threadpools"]


def import_numpy_single_threaded() -> None:
    """Import numpy with a one-thread OpenBLAS, for a process that embeds one query: OpenBLAS
    starts a thread per core at import, which cost about 70 ms of CPU here (numpy's import took
    0.17 s of CPU against 0.10 s in 0.11 s of wall time), and the pass runs on one thread anyway
    (``blas_threads``). The variable is set for the import only: processes started later, an
    upstream server say, see the environment as it was."""
    import sys

    if "numpy" in sys.modules:
        return
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401 - OpenBLAS reads the variable when it loads
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved


@contextlib.contextmanager
def blas_threads(count: int | None) -> Iterator[None]:
    """Run the BLAS numpy uses with ``count`` threads, then restore the setting.

    The model's matrices are small: on this project's 2-core machines one thread was faster
    than two (measured 8 ms against 35 ms per query while another process used a core).
    """
    controller = threadpools() if count else None
    if controller is None:
        yield
        return
    with controller.limit(limits=count, user_api="blas"):
        yield


_CONTROLLER: list[Any] = []


def threadpools() -> Any:
    """One ``threadpoolctl`` controller (finding the loaded libraries is the costly part)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # the semantic extra brings it; without it, BLAS keeps its default
            _CONTROLLER.append(None)
        else:
            import numpy  # noqa: F401 - loads the BLAS the controller must see

            _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]

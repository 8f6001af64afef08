"""Whether the modules an execution may import differ from the last execution's.

The guest keeps what its code imported (``sys.modules``): when the catalog changed under a
session, it must let go of those (``guest/runtime.py``, ``forget_host_modules``), or the code
would keep calling the tools as they were.
"""

from __future__ import annotations

from codemode.bridge.host import ModuleProvider

__all__ = ["ModuleWatch"]


class ModuleWatch:
    """One sandbox's: the modules of the last execution that had any to import."""

    def __init__(self) -> None:
        self._last: ModuleProvider | None = None

    def changed(self, modules: ModuleProvider | None) -> bool:
        """Whether ``modules`` differ from the last ones. An execution with none to import
        (a checkpoint's own program) changes nothing; the first one has nothing to drop."""
        if modules is None:
            return False
        last, self._last = self._last, modules
        return last is not None and last is not modules

"""Which factory builds an engine's parts: chosen once, when the engine is constructed."""

from __future__ import annotations

from codemode.config import CodemodeConfig
from codemode.engine.parts import PartsFactory, local_parts

__all__ = ["parts_factory"]


def parts_factory(config: CodemodeConfig) -> PartsFactory:
    """The shared parts when ``[gateway] shared_store`` is set, else the local ones."""
    if not config.gateway.shared_store:
        return local_parts
    # The one import up the layers: the shared (replicas) implementation of the parts.
    from codemode.replicas.attach import shared_parts

    return shared_parts

"""The owner's own values back in what the approval page shows (never in what the model sees)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.errors import SessionError

if TYPE_CHECKING:
    from codemode.engine import Codemode

__all__ = ["reveal"]


def reveal(engine: Codemode, value: Any, owner: str | None, session: str | None) -> Any:
    """``value`` with the session's privacy tokens replaced by the values they stand for:
    only for the session's owner (a foreign session is not found) and only for a page that
    person sees. Without a privacy net, or a session, ``value`` as it is."""
    from codemode.privacy.tokenizer import detokenize

    registry = engine.registry
    if registry is None or session is None:
        return value
    try:
        privacy = registry.get(session, owner).chain.privacy
    except SessionError:
        return value
    if privacy is None:
        return value
    return detokenize(value, privacy.vault, destination="the approval page")

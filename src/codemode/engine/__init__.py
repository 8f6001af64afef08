"""The engine behind every front end: catalog, generated API, search and sandbox sessions."""

from codemode.engine.engine import Codemode, SearchAnswer

__all__ = ["Codemode", "SearchAnswer"]

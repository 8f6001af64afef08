"""The catalog: tools of every upstream, the definition cache, and opening it from a config."""

from codemode.catalog.cache import DefinitionCache, MemoryDefinitionCache, SQLiteDefinitionCache
from codemode.catalog.catalog import Catalog, ChangeListener
from codemode.catalog.loading import catalog_from_config, open_catalog, server_name_for_spec

__all__ = [
    "Catalog",
    "ChangeListener",
    "DefinitionCache",
    "MemoryDefinitionCache",
    "SQLiteDefinitionCache",
    "catalog_from_config",
    "open_catalog",
    "server_name_for_spec",
]

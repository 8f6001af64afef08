"""Where stores keep their files: one SQLite policy (``sqlite``) and owner-only paths
(``private``)."""

from codemode.storage.sqlite import Migration, open_database

__all__ = ["Migration", "open_database"]

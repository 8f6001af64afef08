"""Memory of fixes: how an error was fixed before, offered when the same error comes back."""

from codemode.memory.fixes import Fix, FixMemory, MemoryFixes, SQLiteFixes
from codemode.memory.signature import error_signature

__all__ = ["Fix", "FixMemory", "MemoryFixes", "SQLiteFixes", "error_signature"]

"""Memory of fixes: how an error was fixed before, offered when the same error comes back."""

from codemode.memory.fixes import Fix, FixMemory, MemoryFixes
from codemode.memory.kv import KVFixes
from codemode.memory.legacy import open_fixes
from codemode.memory.signature import error_signature

__all__ = ["Fix", "FixMemory", "KVFixes", "MemoryFixes", "error_signature", "open_fixes"]

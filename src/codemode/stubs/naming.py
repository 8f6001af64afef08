"""Safe, stable Python identifiers for servers, tools and parameters.

Upstream names may be camelCase, contain dashes, dots or slashes, start with a digit or be a
Python keyword. ``identifier`` maps one name; ``assign_names`` maps a group of names at once and
de-duplicates collisions deterministically (in sorted order of the upstream names, so adding a
tool never renames an existing one unless it collides with it).
"""

from __future__ import annotations

import keyword
import re
import sys
from collections.abc import Iterable

__all__ = [
    "assign_names",
    "class_name",
    "identifier",
    "import_line",
    "parameter_names",
    "server_names",
    "tool_names",
]

_CAMEL_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")


def identifier(name: str, *, fallback: str = "x", reserved: Iterable[str] = ()) -> str:
    """``name`` as a snake_case identifier that is not a keyword and not in ``reserved``."""
    text = _CAMEL_ACRONYM.sub(r"\1_\2", _CAMEL_LOWER_UPPER.sub(r"\1_\2", name))
    text = _NOT_WORD.sub("_", text).strip("_").lower() or fallback
    if text[0].isdigit():
        text = f"{fallback}_{text}"
    # Soft keywords (match, case, type, _) are valid identifiers and stay as they are.
    if keyword.iskeyword(text) or text in set(reserved):
        text += "_"
    return text


def class_name(name: str, *, fallback: str = "Model") -> str:
    """``name`` as a CamelCase class name (``"billing-address"`` -> ``"BillingAddress"``)."""
    words = identifier(name, fallback=fallback).strip("_").split("_")
    text = "".join(word[:1].upper() + word[1:] for word in words if word)
    if not text or not text[0].isalpha():
        text = fallback + text
    return text + "_" if keyword.iskeyword(text) else text


def assign_names(
    names: Iterable[str], *, fallback: str = "x", reserved: Iterable[str] = ()
) -> dict[str, str]:
    """Upstream name -> unique identifier, for a group of names that share a namespace."""
    taken = set(reserved)
    result: dict[str, str] = {}
    for name in sorted(set(names)):
        base = identifier(name, fallback=fallback)
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        result[name] = candidate
    return result


def server_names(servers: Iterable[str]) -> dict[str, str]:
    """Upstream server name -> package name under ``servers``."""
    return assign_names(servers, fallback="server")


def tool_names(tools: Iterable[str]) -> dict[str, str]:
    """Upstream tool name -> module and function name within one server package."""
    return assign_names(tools, fallback="tool")


def code_name(package: str) -> str:
    """The name code gives a server's package: ``time_server`` where the standard library has a
    module of that name (``time``), so ``import time`` and the server both work in one code."""
    return f"{package}_server" if package in sys.stdlib_module_names else package


def import_line(package: str) -> str:
    """How code imports a server's package (see ``code_name``)."""
    name = code_name(package)
    return f"from servers import {package}" + (f" as {name}" if name != package else "")


def parameter_names(parameters: Iterable[str]) -> dict[str, str]:
    """Upstream argument name -> keyword parameter name within one tool's function."""
    return assign_names(parameters, fallback="arg")

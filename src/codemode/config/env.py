"""Environment references in server entries: ``${NAME}``, ``${NAME:-default}``, ``${env:NAME}``.

``${env:NAME}`` is Cursor's spelling; ``${NAME:-default}`` gives a value when NAME is unset. They
expand in every string of a server entry (command, args, env, cwd, url, headers, base_url...), so
secrets stay in the environment and out of the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from codemode.config_model import key_path
from codemode.errors import ConfigError

__all__ = ["expand_references"]

_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_references(
    value: object,
    *,
    source: str,
    prefix: str,
    environ: Mapping[str, str] | None = None,
    loc: tuple[str | int, ...] = (),
) -> object:
    """``value`` with every reference in its strings (in lists and tables too) replaced.

    Raises ``ConfigError`` naming the key (``servers.x.headers.Authorization``) for the first
    variable that is unset and has no default.
    """
    env = os.environ if environ is None else environ
    if isinstance(value, str):
        return _expand(value, env, source, key_path(prefix, loc))
    if isinstance(value, list):
        return [
            expand_references(item, source=source, prefix=prefix, environ=env, loc=(*loc, index))
            for index, item in enumerate(value)
        ]
    if isinstance(value, dict):
        return {
            name: expand_references(
                item, source=source, prefix=prefix, environ=env, loc=(*loc, name)
            )
            for name, item in value.items()
        }
    return value


def _expand(text: str, env: Mapping[str, str], source: str, key: str) -> str:
    def replace(match: re.Match[str]) -> str:
        variable, default = match.group(1), match.group(2)
        found = env.get(variable)
        if found is not None:
            return found
        if default is not None:
            return default
        raise ConfigError(
            f"environment variable {variable} is not set",
            path=source,
            key=key,
            fix=f"export {variable}=..., or write ${{{variable}:-default}} to give a default",
        )

    return _REFERENCE.sub(replace, text)

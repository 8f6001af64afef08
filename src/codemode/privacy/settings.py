"""The ``[privacy]`` config table.

```toml
[privacy]
enabled = true                          # default true
detectors = ["EMAIL", "PHONE", "CARD"]  # default: every built-in kind; "NATIONAL_ID" = all four
patterns = { EMPLOYEE_ID = "EMP-\\d{6}" }   # user detectors: KIND -> regex

[privacy.fields]                        # per server: fields replaced whole (glob paths)
crm = ["contacts[].email", "*.phone"]

[privacy.flows]                         # per server: where its tokenized data may be sent
crm = ["mail"]                          # crm data may go to mail (and always back to crm)
"*" = []                                # servers not listed (this is the default)

[privacy.oracle]                        # search and yes/no tools (see codemode.privacy.oracle)
enabled = true
tools = ["*search*", "crm.is_*"]        # default: searches, lookups, checks, is_/has_ ...
calls_per_minute = 60                   # over all such tools of a session
calls_per_session = 500
similar_calls = 12                      # near-identical calls before a human is asked
```

Flow rules. Data tokenized from a server may always be sent back to that server. Anywhere else
only if the server's list (or, for an unlisted server, the ``"*"`` list) holds a glob matching
the destination. Without a ``"*"`` entry an unlisted server's data goes back only to itself:
the safe default, a forbidden call says which line to add. A value that came from several
servers must be allowed by each of them. A server that returns a value it was given by a
detokenized call does not become a source of it. Values first seen in printed output may go
anywhere (the code held them in clear already).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codemode.errors import ConfigError
from codemode.privacy.detectors import BUILTIN_KINDS, KIND_GROUPS, DetectorSet
from codemode.privacy.fields import parse_field_pattern
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.tokenizer import Tokenizer

__all__ = ["PrivacySettings"]

_KEYS = ("enabled", "detectors", "patterns", "fields", "flows", "oracle")
_ORACLE_COUNTS = ("calls_per_minute", "calls_per_session", "similar_calls")
_KIND = re.compile(r"[A-Z][A-Z0-9_]*")
DEFAULT_FLOW_KEY = "*"


@dataclass(frozen=True, slots=True)
class PrivacySettings:
    enabled: bool = True
    detectors: tuple[str, ...] = BUILTIN_KINDS
    patterns: tuple[tuple[str, str], ...] = ()
    fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    flows: tuple[tuple[str, tuple[str, ...]], ...] = ()
    oracle: OracleSettings = field(default_factory=OracleSettings)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], source: str = "config") -> PrivacySettings:
        """Build from the ``[privacy]`` table (TOML) or the ``"privacy"`` object (JSON)."""
        if not isinstance(table, Mapping):
            raise ConfigError("must be a table", path=source, key="privacy")
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise ConfigError(
                f"unknown key(s) {', '.join(map(repr, unknown))}",
                path=source,
                key=f"privacy.{unknown[0]}",
                fix=f"use only {', '.join(_KEYS)}",
            )
        enabled = table.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(
                "must be true or false", path=source, key="privacy.enabled", fix="enabled = true"
            )
        settings = cls(
            enabled=enabled,
            detectors=_detectors(table.get("detectors", list(BUILTIN_KINDS)), source),
            patterns=_patterns(table.get("patterns", {}), source),
            fields=_server_lists(table.get("fields", {}), source, "fields"),
            flows=_server_lists(table.get("flows", {}), source, "flows"),
            oracle=_oracle(table.get("oracle", {}), source),
        )
        settings.tokenizer()  # compile everything now, so a bad value fails at load time
        return settings

    def tokenizer(self) -> Tokenizer:
        """A new tokenizer for these settings (one per session: its caches hold values)."""
        patterns = {kind: re.compile(regex) for kind, regex in self.patterns}
        return Tokenizer(DetectorSet(self.detectors, patterns), dict(self.fields))

    def flow_targets(self, server: str) -> tuple[tuple[str, ...], str]:
        """The destination globs for data from ``server`` and the config key they come from."""
        for name, targets in self.flows:
            if name == server:
                return targets, f"privacy.flows.{server}"
        for name, targets in self.flows:
            if name == DEFAULT_FLOW_KEY:
                return targets, 'privacy.flows."*"'
        return (), 'privacy.flows."*" (default: back to the source server only)'

    def may_flow(self, source: str, destination: str) -> bool:
        if source == destination:
            return True
        targets, _key = self.flow_targets(source)
        return any(fnmatch.fnmatchcase(destination, glob) for glob in targets)


def _detectors(value: Any, source: str) -> tuple[str, ...]:
    known = (*BUILTIN_KINDS, *KIND_GROUPS)
    fix = f"choose from {', '.join(known)}"
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(
            "must be a list of detector names", path=source, key="privacy.detectors", fix=fix
        )
    unknown = [item for item in value if item not in known]
    if unknown:
        raise ConfigError(
            f"unknown detector(s) {', '.join(map(repr, unknown))}",
            path=source,
            key="privacy.detectors",
            fix=f"{fix}; for your own formats add [privacy.patterns]",
        )
    return tuple(value)


def _patterns(value: Any, source: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            "must be a table of KIND = regex",
            path=source,
            key="privacy.patterns",
            fix='write patterns = { EMPLOYEE_ID = "EMP-\\\\d{6}" }',
        )
    out: list[tuple[str, str]] = []
    for kind, regex in value.items():
        key = f"privacy.patterns.{kind}"
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise ConfigError(
                "a pattern's kind must be upper-case letters, digits and '_', starting with a "
                "letter (it becomes the token name, as in <EMPLOYEE_ID_1>)",
                path=source,
                key=key,
                fix="rename it, e.g. EMPLOYEE_ID",
            )
        if kind in BUILTIN_KINDS or kind in KIND_GROUPS:
            raise ConfigError(
                f"{kind} is a built-in detector",
                path=source,
                key=key,
                fix="give your pattern another name, e.g. " + f"{kind}_CUSTOM",
            )
        if not isinstance(regex, str) or not regex:
            raise ConfigError(
                "must be a non-empty regex string",
                path=source,
                key=key,
                fix=f'write {kind} = "REGEX", e.g. {kind} = "EMP-\\\\d{{6}}"',
            )
        try:
            compiled = re.compile(regex)
        except re.error as error:
            raise ConfigError(
                f"invalid regex {regex!r}: {error.msg} at position {error.pos}",
                path=source,
                key=key,
                fix="fix the regex (Python syntax; in TOML write \\\\d or use '...' strings)",
            ) from None
        if compiled.match("") is not None:
            raise ConfigError(
                f"regex {regex!r} matches the empty string, so it would match everywhere",
                path=source,
                key=key,
                fix="make it require at least one character, e.g. use + instead of *",
            )
        out.append((kind, regex))
    return tuple(out)


def _server_lists(value: Any, source: str, name: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    example = 'crm = ["contacts[].email"]' if name == "fields" else 'crm = ["mail"]'
    if not isinstance(value, Mapping):
        raise ConfigError(
            "must be a table of server = [...]",
            path=source,
            key=f"privacy.{name}",
            fix=f"write [privacy.{name}] then {example}",
        )
    out: list[tuple[str, tuple[str, ...]]] = []
    for server, items in value.items():
        key = f"privacy.{name}.{server}"
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise ConfigError(
                "must be a list of non-empty strings", path=source, key=key, fix=example
            )
        if name == "fields":
            if server == DEFAULT_FLOW_KEY:
                raise ConfigError(
                    "field rules are per server", path=source, key=key, fix="name the server"
                )
            for item in items:
                try:
                    parse_field_pattern(item)
                except ValueError as error:
                    raise ConfigError(str(error), path=source, key=key, fix=example) from None
        out.append((str(server), tuple(items)))
    return tuple(out)


def _oracle(value: Any, source: str) -> OracleSettings:
    key = "privacy.oracle"
    if not isinstance(value, Mapping):
        raise ConfigError("must be a table", path=source, key=key, fix="write [privacy.oracle]")
    known = ("enabled", "tools", *_ORACLE_COUNTS)
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))}",
            path=source,
            key=f"{key}.{unknown[0]}",
            fix=f"use only {', '.join(known)}",
        )
    defaults = OracleSettings()
    enabled = value.get("enabled", defaults.enabled)
    if not isinstance(enabled, bool):
        raise ConfigError("must be true or false", path=source, key=f"{key}.enabled")
    tools = value.get("tools", list(defaults.tools))
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise ConfigError(
            "must be a list of globs over server.tool",
            path=source,
            key=f"{key}.tools",
            fix='write tools = ["*search*", "crm.is_*"]',
        )
    counts: dict[str, int] = {}
    for name in _ORACLE_COUNTS:
        number = value.get(name, getattr(defaults, name))
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ConfigError(
                "must be a positive whole number",
                path=source,
                key=f"{key}.{name}",
                fix=f"write e.g. {name} = {getattr(defaults, name)}",
            )
        counts[name] = number
    return OracleSettings(enabled=enabled, tools=tuple(tools), **counts)

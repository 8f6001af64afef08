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
"*" = []                                # servers not listed: back to themselves only

[privacy.oracle]                        # search and yes/no tools (see codemode.privacy.oracle)
enabled = true
tools = ["*search*", "crm.is_*"]        # default: searches, lookups, checks, is_/has_ ...
calls_per_minute = 1000                 # over all such tools of a session
calls_per_session = 5000
# similar_calls is still read and ignored: pieces of hidden values are the signal
```

Flow rules. Data tokenized from a server may always be sent back to that server. A server
with a list (or, for an unlisted server, the ``"*"`` list) sends it only where one of its globs
matches the destination; a forbidden call is refused before anything is asked and says which
line to add. With no list and no ``"*"`` entry (the default), data may go to tools that declare
``openWorldHint: false``, and to any other tool only with the human's approval of that call
(``codemode.privacy.flows``). A value that came from several servers must be allowed by each
of them. A server that returns a value it was given by a
detokenized call does not become a source of it. Values first seen in printed output may go
anywhere (the code held them in clear already).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, StrictStr

from codemode.config_model import ConfigModel, Hint, did_you_mean, invalid, validate_section
from codemode.privacy.detectors import BUILTIN_KINDS, KIND_GROUPS, DetectorSet
from codemode.privacy.fields import parse_field_pattern
from codemode.privacy.oracle import OracleSettings
from codemode.privacy.tokenizer import Tokenizer

__all__ = ["PrivacySettings"]

_KIND = re.compile(r"[A-Z][A-Z0-9_]*")
_KNOWN_DETECTORS = (*BUILTIN_KINDS, *KIND_GROUPS)
DEFAULT_FLOW_KEY = "*"


def _detector(name: str) -> str:
    if name not in _KNOWN_DETECTORS:
        close = did_you_mean(name, _KNOWN_DETECTORS)
        raise invalid(
            f"unknown detector {name!r}",
            (f"{close} " if close else "")
            + f"choose from {', '.join(_KNOWN_DETECTORS)}; for your own formats add "
            "[privacy.patterns]",
        )
    return name


def _pattern_kind(kind: str) -> str:
    if not _KIND.fullmatch(kind):
        raise invalid(
            "a pattern's kind must be upper-case letters, digits and '_', starting with a letter "
            "(it becomes the token name, as in <EMPLOYEE_ID_1>)",
            "rename it, e.g. EMPLOYEE_ID",
        )
    if kind in _KNOWN_DETECTORS:
        raise invalid(
            f"{kind} is a built-in detector", f"give your pattern another name, e.g. {kind}_CUSTOM"
        )
    return kind


def _regex(regex: str) -> str:
    try:
        compiled = re.compile(regex)
    except re.error as error:
        raise invalid(
            f"invalid regex {regex!r}: {error.msg} at position {error.pos}",
            "fix the regex (Python syntax; in TOML write \\\\d or use '...' strings)",
        ) from None
    if compiled.match("") is not None:
        raise invalid(
            f"regex {regex!r} matches the empty string, so it would match everywhere",
            "make it require at least one character, e.g. use + instead of *",
        )
    return regex


def _field_server(server: str) -> str:
    if server == DEFAULT_FLOW_KEY:
        raise invalid("field rules are per server", "name the server")
    return server


def _field_pattern(pattern: str) -> str:
    try:
        parse_field_pattern(pattern)
    except ValueError as error:
        raise invalid(str(error), 'write e.g. crm = ["contacts[].email"]') from None
    return pattern


Regex = Annotated[
    StrictStr,
    AfterValidator(_regex),
    Hint(expects="a non-empty regex string", fix='write KIND = "REGEX", e.g. EMP = "EMP-\\\\d{6}"'),
]
FieldPatterns = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_field_pattern)], ...],
    Hint(expects="a list of non-empty strings", fix='write e.g. crm = ["contacts[].email"]'),
]
Destinations = Annotated[
    tuple[Annotated[StrictStr, Field(min_length=1)], ...],
    Hint(expects="a list of non-empty strings", fix='write e.g. crm = ["mail"]'),
]


class PrivacySettings(ConfigModel):
    enabled: StrictBool = True
    detectors: Annotated[
        tuple[Annotated[StrictStr, AfterValidator(_detector)], ...],
        Hint(expects="a list of detector names", fix=f"choose from {', '.join(_KNOWN_DETECTORS)}"),
    ] = BUILTIN_KINDS
    # User detectors: KIND -> regex.
    patterns: Annotated[
        dict[Annotated[StrictStr, AfterValidator(_pattern_kind)], Regex],
        Hint(
            expects="a table of KIND = regex",
            fix='write patterns = { EMPLOYEE_ID = "EMP-\\\\d{6}" }',
        ),
    ] = Field(default_factory=dict)
    # Per server: fields replaced whole (glob paths).
    fields: Annotated[
        dict[Annotated[StrictStr, AfterValidator(_field_server)], FieldPatterns],
        Hint(
            expects="a table of server = [...]",
            fix='write [privacy.fields] then crm = ["contacts[].email"]',
        ),
    ] = Field(default_factory=dict)
    # Per server (or "*"): where its tokenized data may be sent.
    flows: Annotated[
        dict[StrictStr, Destinations],
        Hint(expects="a table of server = [...]", fix='write [privacy.flows] then crm = ["mail"]'),
    ] = Field(default_factory=dict)
    # Budgets and pattern checks for search and yes/no tools.
    oracle: OracleSettings = Field(default_factory=OracleSettings)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], source: str = "config") -> PrivacySettings:
        """Build from the ``[privacy]`` table (TOML) or the ``"privacy"`` object (JSON)."""
        return validate_section(cls, table, source=source, prefix="privacy")

    def tokenizer(self) -> Tokenizer:
        """A new tokenizer for these settings (one per session: its caches hold values)."""
        patterns = {kind: re.compile(regex) for kind, regex in self.patterns.items()}
        return Tokenizer(DetectorSet(self.detectors, patterns), dict(self.fields))

    def flow_targets(self, server: str) -> tuple[tuple[str, ...], str]:
        """The destination globs for data from ``server`` and the config key they come from."""
        if server in self.flows:
            return self.flows[server], f"privacy.flows.{server}"
        if DEFAULT_FLOW_KEY in self.flows:
            return self.flows[DEFAULT_FLOW_KEY], 'privacy.flows."*"'
        return (), 'privacy.flows."*" (default: closed-world tools; others ask the user)'

    def may_flow(self, source: str, destination: str) -> bool:
        """Whether the config itself lets ``source``'s data reach ``destination``."""
        if source == destination:
            return True
        targets, _key = self.flow_targets(source)
        return any(fnmatch.fnmatchcase(destination, glob) for glob in targets)

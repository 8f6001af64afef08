"""The generated functions' signatures as data: what ``servers.<server>.<tool>(...)`` accepts.

Built from the same naming rules as the stubs (``codemode.stubs.naming``), so a keyword the
check accepts is exactly a keyword the generated function has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from codemode.stubs.naming import identifier, parameter_names, server_names, tool_names
from codemode.tools import ToolSpec

__all__ = ["Param", "SignatureTable", "ToolSignature"]


@dataclass(frozen=True, slots=True)
class Param:
    upstream: str
    required: bool
    # The JSON Schema type(s) when the schema states them plainly; empty means "anything".
    types: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ToolSignature:
    server: str
    tool: str
    function: str
    params: dict[str, Param]

    @property
    def required(self) -> list[str]:
        return [name for name, param in self.params.items() if param.required]


@dataclass
class SignatureTable:
    # package name under ``servers`` -> function name -> signature
    servers: dict[str, dict[str, ToolSignature]] = field(default_factory=dict)
    # packages of servers that are down: importing one raises an ImportError saying why
    unavailable: frozenset[str] = frozenset()

    @classmethod
    def from_specs(
        cls, specs: Iterable[ToolSpec], unavailable: Mapping[str, str] | None = None
    ) -> SignatureTable:
        by_server: dict[str, list[ToolSpec]] = {}
        for spec in specs:
            by_server.setdefault(spec.server, []).append(spec)
        down = [server for server in unavailable or {} if server not in by_server]
        packages = server_names([*by_server, *down])  # named as the stubs name them
        table = cls(unavailable=frozenset(packages[server] for server in down))
        for server, group in by_server.items():
            functions = tool_names(spec.name for spec in group)
            table.servers[packages[server]] = {
                functions[spec.name]: _signature(spec, functions[spec.name]) for spec in group
            }
        return table

    def tool(self, package: str, function: str) -> ToolSignature | None:
        return self.servers.get(package, {}).get(function)


def _signature(spec: ToolSpec, function: str) -> ToolSignature:
    schema = spec.input_schema if isinstance(spec.input_schema, dict) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = {str(name) for name in schema.get("required") or [] if str(name) in properties}
    names = parameter_names(str(name) for name in properties)
    params = {
        names[str(upstream)]: Param(
            str(upstream), str(upstream) in required, _types(properties[upstream])
        )
        for upstream in properties
    }
    return ToolSignature(spec.server, spec.name, function or identifier(spec.name), params)


def _types(schema: object) -> frozenset[str]:
    if not isinstance(schema, dict) or "$ref" in schema or "anyOf" in schema:
        return frozenset()
    if "oneOf" in schema or "allOf" in schema or "enum" in schema or "const" in schema:
        return frozenset()
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list) and all(isinstance(item, str) for item in kind):
        return frozenset(kind)
    return frozenset()

"""OpenAPI operations -> ``ToolSpec``s, plus where each argument goes in the HTTP request."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from codemode.connectors.openapi_spec import RefResolver
from codemode.errors import SchemaError
from codemode.tools import ToolSpec

__all__ = ["ArgBinding", "Operation", "build_operations", "operations_to_specs", "spec_base_url"]

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
READ_ONLY_METHODS = frozenset({"get", "head", "options"})
DESCRIPTION_LIMIT = 1200
PARAM_DESCRIPTION_LIMIT = 600
# Output schemas are expanded two refs deep: the response object and what it points at
# directly. Deeper expansion makes Stripe's responses hundreds of kilobytes each.
OUTPUT_REF_DEPTH = 2
# Headers that OpenAPI says are ignored as parameters (the client or config sets them).
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})

_PARAGRAPH_TAGS = re.compile(r"</?p>")

Location = Literal["path", "query", "header", "cookie", "body", "body_property"]
BodyKind = Literal["json", "form", "multipart", "raw"]


@dataclass(frozen=True, slots=True)
class ArgBinding:
    """One tool argument: its name in ``input_schema`` and where it goes in the request."""

    argument: str
    location: Location
    name: str
    style: str | None = None
    explode: bool = True


@dataclass(frozen=True, slots=True)
class Operation:
    spec: ToolSpec
    method: str
    path: str
    bindings: tuple[ArgBinding, ...]
    body_media_type: str | None = None
    body_kind: BodyKind | None = None
    server_url: str | None = None


def operations_to_specs(server: str, spec: dict[str, Any]) -> list[ToolSpec]:
    """Every operation of an OpenAPI 3.0/3.1 document as a ``ToolSpec``, in document order."""
    return [operation.spec for operation in build_operations(server, spec)]


def spec_base_url(spec: dict[str, Any]) -> str | None:
    """The first ``servers`` URL with its variables set to their defaults."""
    return _server_url(spec.get("servers"))


def build_operations(server: str, spec: dict[str, Any]) -> list[Operation]:
    resolver = RefResolver(spec)
    paths = spec.get("paths") or {}
    operations: list[Operation] = []
    used_names: set[str] = set()
    for path, raw_item in paths.items():
        item = resolver.lookup(raw_item["$ref"]) if "$ref" in raw_item else raw_item
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            name = _unique(_tool_name(method, str(path), op), used_names)
            try:
                operations.append(
                    _operation(
                        server,
                        name=name,
                        method=method,
                        path=str(path),
                        item=item,
                        op=op,
                        resolver=resolver,
                    )
                )
            except SchemaError as error:
                raise SchemaError(
                    f"OpenAPI operation {method.upper()} {path}: {error.message}", fix=error.fix
                ) from error
    return operations


def _tool_name(method: str, path: str, op: dict[str, Any]) -> str:
    operation_id = op.get("operationId")
    if isinstance(operation_id, str) and operation_id.strip():
        return operation_id.strip()
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{method}_{path}").strip("_")


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 2
    while candidate in used:
        candidate, n = f"{name}_{n}", n + 1
    used.add(candidate)
    return candidate


def _operation(
    server: str,
    *,
    name: str,
    method: str,
    path: str,
    item: dict[str, Any],
    op: dict[str, Any],
    resolver: RefResolver,
) -> Operation:
    properties: dict[str, Any] = {}
    required: list[str] = []
    bindings: list[ArgBinding] = []

    for param in _parameters(item, op, resolver):
        location = param.get("in")
        pname = param.get("name")
        if location not in ("path", "query", "header", "cookie") or not isinstance(pname, str):
            continue
        if location == "header" and pname.lower() in _IGNORED_HEADERS:
            continue
        argument = pname if pname not in properties else f"{pname}_{location}"
        argument = _unique_key(argument, properties)
        properties[argument] = _param_schema(param, resolver)
        if location == "path" or param.get("required") is True:
            required.append(argument)
        style = str(param.get("style") or ("form" if location in ("query", "cookie") else "simple"))
        explode = param.get("explode", style == "form")
        bindings.append(ArgBinding(argument, location, pname, style, explode is True))

    media_type, body_kind = None, None
    body = op.get("requestBody")
    if isinstance(body, dict):
        if "$ref" in body:
            body = resolver.lookup(body["$ref"])
        media_type, body_kind, body_schema = _body_media(body, resolver)
        if media_type is not None:
            body_required = body.get("required") is True
            flat = _object_shape(body_schema) if body_kind != "raw" else None
            if flat is not None and not any(prop in properties for prop in flat[0]):
                props, props_required = flat
                for prop, prop_schema in props.items():
                    properties[prop] = prop_schema
                    if body_required and prop in props_required:
                        required.append(prop)
                    bindings.append(ArgBinding(prop, "body_property", prop))
            else:
                argument = _unique_key("body", properties)
                schema = dict(body_schema) if isinstance(body_schema, dict) else {}
                if body.get("description") and "description" not in schema:
                    schema["description"] = _trim(str(body["description"]), PARAM_DESCRIPTION_LIMIT)
                properties[argument] = schema
                if body_required:
                    required.append(argument)
                bindings.append(ArgBinding(argument, "body", "body"))

    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    input_schema["additionalProperties"] = False

    servers = op.get("servers") or item.get("servers")
    return Operation(
        spec=ToolSpec(
            server=server,
            name=name,
            description=_description(op),
            input_schema=input_schema,
            output_schema=_output_schema(op, resolver),
            source="openapi",
            read_only=method in READ_ONLY_METHODS,
            destructive=method == "delete",
            method=method.upper(),
            path=path,
            operation_id=op.get("operationId") if isinstance(op.get("operationId"), str) else None,
            title=op.get("summary") if isinstance(op.get("summary"), str) else None,
            tags=tuple(tag for tag in op.get("tags") or () if isinstance(tag, str)),
        ),
        method=method.upper(),
        path=path,
        bindings=tuple(bindings),
        body_media_type=media_type,
        body_kind=body_kind,
        server_url=_server_url(servers) if servers else None,
    )


def _unique_key(name: str, taken: dict[str, Any]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _parameters(
    item: dict[str, Any], op: dict[str, Any], resolver: RefResolver
) -> list[dict[str, Any]]:
    """Path-item parameters overridden by operation parameters with the same (name, in)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
        param = resolver.lookup(raw["$ref"]) if isinstance(raw, dict) and "$ref" in raw else raw
        if isinstance(param, dict):
            merged[(str(param.get("name")), str(param.get("in")))] = param
    return list(merged.values())


def _param_schema(param: dict[str, Any], resolver: RefResolver) -> dict[str, Any]:
    raw = param.get("schema")
    if raw is None and isinstance(param.get("content"), dict):
        for media in param["content"].values():
            if isinstance(media, dict) and "schema" in media:
                raw = media["schema"]
                break
    resolved = resolver.resolve(raw) if raw is not None else {}
    schema = dict(resolved) if isinstance(resolved, dict) else {}
    description = param.get("description")
    if isinstance(description, str) and description.strip():
        schema["description"] = _trim(description, PARAM_DESCRIPTION_LIMIT)
    if param.get("deprecated") is True:
        schema["deprecated"] = True
    if "example" in param and "example" not in schema and "examples" not in schema:
        schema["example"] = param["example"]
    return schema


def _media_kind(media_type: str) -> BodyKind:
    base = media_type.split(";", maxsplit=1)[0].strip().lower()
    if base == "application/json" or base.endswith("+json"):
        return "json"
    if base == "application/x-www-form-urlencoded":
        return "form"
    if base == "multipart/form-data":
        return "multipart"
    return "raw"


_KIND_ORDER = {"json": 0, "form": 1, "multipart": 2, "raw": 3}


def _body_media(
    body: dict[str, Any], resolver: RefResolver
) -> tuple[str | None, BodyKind | None, Any]:
    content = body.get("content")
    if not isinstance(content, dict) or not content:
        return None, None, None
    media_type = min(content, key=lambda mt: _KIND_ORDER[_media_kind(str(mt))])
    media = content[media_type]
    raw_schema = media.get("schema", {}) if isinstance(media, dict) else {}
    return str(media_type), _media_kind(str(media_type)), resolver.resolve(raw_schema)


def _object_shape(schema: Any) -> tuple[dict[str, Any], set[str]] | None:
    """The properties and required names of an object schema (merging ``allOf``), if simple."""
    if not isinstance(schema, dict) or "oneOf" in schema or "anyOf" in schema:
        return None
    properties: dict[str, Any] = {}
    required: set[str] = set()
    for part in schema.get("allOf") or []:
        shape = _object_shape(part)
        if shape is None:
            return None
        properties.update(shape[0])
        required |= shape[1]
    own = schema.get("properties")
    if isinstance(own, dict):
        properties.update(own)
    elif "allOf" not in schema:
        return None
    if isinstance(schema.get("required"), list):
        required |= {str(name) for name in schema["required"]}
    if not properties and schema.get("additionalProperties") not in (None, False):
        return None  # a free-form object: keep it whole as ``body``
    return properties, required


def _output_schema(op: dict[str, Any], resolver: RefResolver) -> dict[str, Any] | None:
    responses = op.get("responses")
    if not isinstance(responses, dict):
        return None
    codes = sorted(str(code) for code in responses if str(code).startswith("2"))
    for code in codes:
        response = responses.get(code, responses.get(int(code) if code.isdigit() else code))
        if isinstance(response, dict) and "$ref" in response:
            response = resolver.lookup(response["$ref"])
        content = response.get("content") if isinstance(response, dict) else None
        if not isinstance(content, dict):
            continue
        for media_type, media in content.items():
            if _media_kind(str(media_type)) == "json" and isinstance(media, dict):
                schema = media.get("schema")
                if schema is None:
                    continue
                resolved = resolver.resolve(schema, max_depth=OUTPUT_REF_DEPTH)
                return resolved if isinstance(resolved, dict) and resolved else None
    return None


def _description(op: dict[str, Any]) -> str:
    summary = _strip_html(str(op.get("summary") or ""))
    description = _strip_html(str(op.get("description") or ""))
    if summary and description and not description.startswith(summary.rstrip(".")):
        text = f"{summary}\n\n{description}"
    else:
        text = description or summary
    return _trim(text, DESCRIPTION_LIMIT)


def _strip_html(text: str) -> str:
    return _PARAGRAPH_TAGS.sub("", text).strip()


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    boundary = max(cut.rfind(". "), cut.rfind("\n"))
    cut = cut[: boundary + 1] if boundary > limit // 2 else cut.rsplit(" ", 1)[0]
    return cut.rstrip() + " …"


def _server_url(servers: Any) -> str | None:
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        return None
    url = str(servers[0].get("url") or "")
    for var, info in (servers[0].get("variables") or {}).items():
        if isinstance(info, dict) and "default" in info:
            url = url.replace("{" + str(var) + "}", str(info["default"]))
    return url or None

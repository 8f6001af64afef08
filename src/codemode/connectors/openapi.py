"""OpenAPI connector: each operation of an OpenAPI 3.x document is a tool, called over HTTP.

Calls run on the host with ``httpx2`` (the HTTP client the MCP SDK uses: one stack in the
process); base URL and auth headers come from config, so credentials never enter the sandbox.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urljoin

from codemode.connectors.base import BaseConnector
from codemode.connectors.openapi_ops import (
    ArgBinding,
    Operation,
    build_operations,
    operations_to_specs,
    spec_base_url,
)
from codemode.connectors.openapi_spec import load_spec
from codemode.errors import SchemaError, ToolNotFoundError, UpstreamUnavailableError
from codemode.tools import ToolResult, ToolSpec

if TYPE_CHECKING:
    import httpx2

__all__ = ["OpenAPIConnector", "load_spec", "operations_to_specs"]

ERROR_BODY_LIMIT = 2000


class OpenAPIConnector(BaseConnector):
    """A connector over one OpenAPI document.

    ``spec_source`` is a path, a URL or an already loaded document. ``base_url`` overrides the
    spec's ``servers``; ``headers`` (e.g. ``Authorization``) are sent with every request and
    win over header arguments of the same name. ``transport`` replaces the network (tests pass
    ``httpx2.MockTransport``).
    """

    def __init__(
        self,
        name: str,
        spec_source: str | Path | Mapping[str, Any],
        *,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self._source = spec_source
        self._base_url = base_url
        self._headers = dict(headers or {})
        self._timeout_s = timeout_s
        self._transport = transport
        self._operations: dict[str, Operation] | None = None
        self._default_base: str | None = None
        self._client: httpx2.AsyncClient | None = None

    async def list_tools(self) -> list[ToolSpec]:
        operations = await self._load()
        return [operation.spec for operation in operations.values()]

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        try:
            operations = await self._load()
        except SchemaError as error:  # the tools came from the cache; the spec is now unusable
            raise UpstreamUnavailableError(
                f"OpenAPI server {self.name!r} cannot be called: {error.message}", fix=error.fix
            ) from error
        operation = operations.get(tool)
        if operation is None:
            raise ToolNotFoundError(
                f"{self.name} has no operation {tool!r}",
                fix="search the catalog for the tool's exact name",
            )
        try:
            request = self._build_request(operation, arguments)
        except _ArgumentError as error:
            return ToolResult(value=None, is_error=True, error_message=str(error))
        return await self._send(operation, request)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _load(self) -> dict[str, Operation]:
        if self._operations is None:
            import anyio.to_thread

            self._operations = await anyio.to_thread.run_sync(self._load_sync)
        return self._operations

    def _load_sync(self) -> dict[str, Operation]:
        source = self._source
        document = dict(source) if isinstance(source, Mapping) else load_spec(source)
        default = spec_base_url(document)
        remote = isinstance(source, str) and source.startswith(("http://", "https://"))
        if default and remote and not default.startswith(("http://", "https://")):
            # A relative server URL is relative to where the spec came from.
            default = urljoin(str(source), default)
        self._default_base = default
        return {op.spec.name: op for op in build_operations(self.name, document)}

    def _base_for(self, operation: Operation) -> str:
        base = self._base_url or operation.server_url or self._default_base
        if not base or not base.startswith(("http://", "https://")):
            raise UpstreamUnavailableError(
                f"OpenAPI server {self.name!r} cannot be called: it has no absolute base URL "
                f"(spec servers: {base or 'none'})",
                fix=f"set base_url for server {self.name!r} in the codemode config",
            )
        return base.rstrip("/")

    def _build_request(self, operation: Operation, arguments: dict[str, Any]) -> _Request:
        by_argument = {binding.argument: binding for binding in operation.bindings}
        unknown = sorted(set(arguments) - set(by_argument))
        if unknown:
            raise _ArgumentError(
                f"{operation.spec.name}: unknown argument(s) {', '.join(unknown)}; "
                f"expected some of: {', '.join(by_argument) or 'none'}"
            )
        missing = [
            name
            for name in operation.spec.input_schema.get("required", [])
            if arguments.get(name) is None
        ]
        if missing:
            raise _ArgumentError(
                f"{operation.spec.name}: missing required argument(s) {', '.join(missing)}"
            )
        path = operation.path
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {}
        cookies: list[str] = []
        body_props: dict[str, Any] = {}
        body: Any = None
        has_body = False
        for argument, value in arguments.items():
            if value is None:
                continue
            binding = by_argument[argument]
            if binding.location == "path":
                path = path.replace("{" + binding.name + "}", quote(_scalar(value), safe=""))
            elif binding.location == "query":
                query.extend(_query_pairs(binding, value))
            elif binding.location == "header":
                headers[binding.name] = _scalar(value)
            elif binding.location == "cookie":
                cookies.append(f"{binding.name}={quote(_scalar(value), safe='')}")
            elif binding.location == "body_property":
                body_props[binding.name] = value
                has_body = True
            else:
                body, has_body = value, True
        if body_props:
            body = body_props
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        for key, value in self._headers.items():
            for existing in [h for h in headers if h.lower() == key.lower()]:
                del headers[existing]
            headers[key] = value
        url = self._base_for(operation) + path
        return _Request(operation.method, url, query, headers, body if has_body else _NO_BODY)

    async def _send(self, operation: Operation, request: _Request) -> ToolResult:
        import httpx2

        if self._client is None:
            self._client = httpx2.AsyncClient(
                transport=self._transport, timeout=self._timeout_s, follow_redirects=True
            )
        headers = dict(request.headers)
        kwargs: dict[str, Any] = {"params": request.query}
        if request.body is not _NO_BODY:
            body_kwargs, content_type = _body_kwargs(operation, request.body)
            kwargs.update(body_kwargs)
            if content_type and not any(h.lower() == "content-type" for h in headers):
                headers["Content-Type"] = content_type
        kwargs["headers"] = headers
        where = f"{request.method} {request.url}"
        try:
            response = await self._client.request(request.method, request.url, **kwargs)
        except httpx2.TimeoutException as error:
            raise UpstreamUnavailableError(
                f"{self.name}: {where} timed out after {self._timeout_s:g} s ({error!r})",
                fix="check that the API is reachable, or raise timeout_s in the config",
            ) from error
        except httpx2.HTTPError as error:
            raise UpstreamUnavailableError(
                f"{self.name}: {where} failed: {error!r}",
                fix="check the server's base_url in the config and that the API is reachable",
            ) from error
        value = _decode(response)
        if response.is_success:
            return ToolResult(value=value)
        text = response.text
        if len(text) > ERROR_BODY_LIMIT:
            text = text[:ERROR_BODY_LIMIT] + f"… ({len(response.text)} characters)"
        return ToolResult(
            value=value,
            is_error=True,
            error_message=f"HTTP {response.status_code} {response.reason_phrase} "
            f"from {request.method} {operation.path}: {text}",
        )


class _ArgumentError(Exception):
    pass


_NO_BODY: Any = object()


class _Request:
    __slots__ = ("body", "headers", "method", "query", "url")

    def __init__(
        self,
        method: str,
        url: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
    ) -> None:
        self.method = method
        self.url = url
        self.query = query
        self.headers = headers
        self.body = body


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_scalar(item) for item in value)
    if isinstance(value, dict):
        return ",".join(f"{k},{_scalar(v)}" for k, v in value.items())
    return str(value)


def _query_pairs(binding: ArgBinding, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, list | tuple):
        if binding.explode:
            return [(binding.name, _scalar(item)) for item in value]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(binding.style or "", ",")
        return [(binding.name, separator.join(_scalar(item) for item in value))]
    if isinstance(value, dict):
        if binding.style == "deepObject":
            return _deep_pairs(binding.name, value)
        if binding.explode:
            return [(str(key), _scalar(item)) for key, item in value.items()]
        return [(binding.name, _scalar(value))]
    return [(binding.name, _scalar(value))]


def _deep_pairs(prefix: str, value: Any) -> list[tuple[str, str]]:
    """``a[b][0]=c`` encoding of nested data (deepObject; also Stripe's form bodies)."""
    if isinstance(value, dict):
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            pairs.extend(_deep_pairs(f"{prefix}[{key}]", item))
        return pairs
    if isinstance(value, list | tuple):
        pairs = []
        for index, item in enumerate(value):
            pairs.extend(_deep_pairs(f"{prefix}[{index}]", item))
        return pairs
    return [(prefix, _scalar(value))]


def _body_kwargs(operation: Operation, body: Any) -> tuple[dict[str, Any], str | None]:
    """httpx2 keyword arguments for the body, and the Content-Type to send (None: httpx2's)."""
    media_type = operation.body_media_type or "application/json"
    if operation.body_kind == "json":
        return {"content": json.dumps(body, separators=(",", ":")).encode()}, media_type
    if operation.body_kind == "form" and isinstance(body, dict):
        pairs: list[tuple[str, str]] = []
        for key, value in body.items():
            pairs.extend(_deep_pairs(str(key), value))
        return {"content": urlencode(pairs).encode()}, "application/x-www-form-urlencoded"
    if operation.body_kind == "multipart" and isinstance(body, dict):
        return _multipart(body)
    if isinstance(body, bytes | str):
        content = body.encode() if isinstance(body, str) else body
    else:
        content = json.dumps(body).encode()
    return {"content": content}, media_type


def _multipart(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    boundary = uuid.uuid4().hex
    chunks: list[bytes] = []
    for key, value in body.items():
        name = str(key).replace('"', "%22")
        if isinstance(value, bytes):
            head = (
                f'Content-Disposition: form-data; name="{name}"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream"
            )
            data = value
        else:
            head = f'Content-Disposition: form-data; name="{name}"'
            text = json.dumps(value) if isinstance(value, dict | list) else _scalar(value)
            data = text.encode()
        chunks.append(f"--{boundary}\r\n{head}\r\n\r\n".encode() + data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return {"content": b"".join(chunks)}, f"multipart/form-data; boundary={boundary}"


def _decode(response: httpx2.Response) -> Any:
    if not response.content:
        return None
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return response.json()
        except ValueError:
            return response.text
    if content_type.startswith("text/") or content_type in ("application/xml", ""):
        return response.text
    return response.content

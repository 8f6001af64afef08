"""Reading OpenAPI documents: loading files or URLs, and resolving local ``$ref``s."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from codemode.errors import SchemaError, UpstreamUnavailableError
from codemode.jsonpointer import MISSING, resolve_local_ref

__all__ = ["RefResolver", "load_spec"]

# Vendor extensions (``x-...``) are dropped from resolved schemas: they cost tokens and no
# consumer reads them.
_DEFAULT_MAX_DEPTH = 16
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def load_spec(path_or_url: str | Path) -> dict[str, Any]:
    """Read an OpenAPI document from a file (JSON, YAML, optionally ``.gz``) or an http(s) URL."""
    source = str(path_or_url)
    if source.startswith(("http://", "https://")):
        raw = _fetch(source)
    else:
        path = Path(source).expanduser()
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise SchemaError(
                f"cannot read OpenAPI spec {source}: {error.strerror or error}",
                fix="check the path given with --openapi or in the config",
            ) from error
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise SchemaError(
                f"OpenAPI spec {source} looks gzip-compressed but cannot be decompressed: {error}",
                fix="re-download the file or give the uncompressed JSON/YAML",
            ) from error
    document = _parse(raw, source)
    if not isinstance(document, dict):
        raise SchemaError(
            f"OpenAPI spec {source} is not a JSON/YAML object (got {type(document).__name__})",
            fix="point at an OpenAPI 3.x document",
        )
    version = str(document.get("openapi", ""))
    if not version.startswith("3."):
        found = f"'swagger: {document['swagger']}'" if "swagger" in document else "no 'openapi' key"
        raise SchemaError(
            f"{source} is not an OpenAPI 3.x document ({found})",
            fix="convert Swagger 2.0 specs to OpenAPI 3 (e.g. with swagger2openapi) first",
        )
    if not isinstance(document.get("paths", {}), dict):
        raise SchemaError(f"OpenAPI spec {source}: 'paths' is not an object", fix="fix the spec")
    return document


def _fetch(url: str) -> bytes:
    import httpx2

    try:
        response = httpx2.get(url, follow_redirects=True, timeout=30.0)
        response.raise_for_status()
    except httpx2.HTTPError as error:
        raise UpstreamUnavailableError(
            f"cannot download OpenAPI spec {url}: {error}",
            fix="check the URL, or download the spec and give its file path",
        ) from error
    return response.content


def _parse(raw: bytes, source: str) -> Any:
    text_start = raw.lstrip()[:1]
    if text_start in (b"{", b"["):
        try:
            return json.loads(raw)
        except ValueError as error:
            raise SchemaError(
                f"OpenAPI spec {source} is not valid JSON: {error}",
                fix="validate the file with a JSON linter",
            ) from error
    import yaml

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is 10x faster
        return yaml.load(raw, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as error:
        raise SchemaError(
            f"OpenAPI spec {source} is neither valid JSON nor valid YAML: {error}",
            fix="validate the file with a YAML or JSON linter",
        ) from error


class RefResolver:
    """Inlines local ``$ref``s (``#/...``) of one document, with cycle protection.

    A ref met again inside its own expansion becomes the permissive schema ``{}``, so a recursive
    schema is expanded one level; refs nested deeper than ``max_depth`` refs also become ``{}``
    (highly connected specs such as Stripe's would otherwise expand into millions of nodes).
    Expansions that did not hit a cycle depend only on the remaining depth, so they are memoized
    and shared: the returned trees may share sub-objects and must be treated as read-only.
    """

    def __init__(self, document: dict[str, Any], *, max_depth: int = _DEFAULT_MAX_DEPTH) -> None:
        self._document = document
        self._max_depth = max_depth
        self._memo: dict[tuple[str, int], Any] = {}
        self._stack: list[str] = []

    def lookup(self, ref: str) -> Any:
        """The raw target of a local ref, without resolving inside it."""
        if not ref.startswith("#"):
            raise SchemaError(
                f"external $ref {ref!r} is not supported",
                fix="bundle the spec into one file (e.g. `redocly bundle`) first",
            )
        node = resolve_local_ref(self._document, ref)
        if node is MISSING:
            raise SchemaError(f"$ref {ref!r} points nowhere", fix="fix the reference")
        return node

    def resolve(self, node: Any, *, max_depth: int | None = None) -> Any:
        """``node`` with its refs inlined; ``max_depth`` overrides the resolver's ref depth."""
        saved = self._max_depth
        if max_depth is not None:
            self._max_depth = max_depth
        try:
            value, _ = self._resolve(node)
        finally:
            self._max_depth = saved
        return value

    def _resolve(self, node: Any) -> tuple[Any, frozenset[str]]:
        """Returns the resolved node and the refs on the stack it was cut at."""
        if isinstance(node, list):
            items: list[Any] = []
            cuts: frozenset[str] = frozenset()
            for item in node:
                value, item_cuts = self._resolve(item)
                items.append(value)
                cuts |= item_cuts
            return items, cuts
        if not isinstance(node, dict):
            return node, frozenset()
        ref = node.get("$ref")
        if isinstance(ref, str):
            resolved, cuts = self._resolve_ref(ref)
            siblings = {k: v for k, v in node.items() if k != "$ref" and not k.startswith("x-")}
            if not siblings or not isinstance(resolved, dict):
                return resolved, cuts
            # OpenAPI 3.1 allows keywords beside $ref (e.g. a description): they win.
            extra, extra_cuts = self._resolve(siblings)
            return {**resolved, **extra}, cuts | extra_cuts
        result: dict[str, Any] = {}
        cuts = frozenset()
        for key, value in node.items():
            if key.startswith("x-"):
                continue
            if key in _NAME_MAPS and isinstance(value, dict):
                # Property names are data, not keywords: a property called "x-id" is kept.
                sub: dict[str, Any] = {}
                for name, child in value.items():
                    sub[name], child_cuts = self._resolve(child)
                    cuts |= child_cuts
                result[key] = sub
                continue
            if key in ("example", "examples", "enum", "const", "default"):
                result[key] = value
                continue
            result[key], value_cuts = self._resolve(value)
            cuts |= value_cuts
        return result, cuts

    def _resolve_ref(self, ref: str) -> tuple[Any, frozenset[str]]:
        remaining = self._max_depth - len(self._stack)
        key = (ref, remaining)
        if key in self._memo:
            return self._memo[key], frozenset()
        if remaining <= 0:
            return {}, frozenset()
        if ref in self._stack:
            return {}, frozenset({ref})
        target = self.lookup(ref)
        self._stack.append(ref)
        try:
            value, cuts = self._resolve(target)
        finally:
            self._stack.pop()
        cuts = cuts - {ref}
        if not cuts:
            self._memo[key] = value
        return value, cuts

"""Bearer tokens for the HTTP gateway: no token, no access; each token's owner owns sessions.

Tokens come from config (``[gateway.tokens]``, owner = token), the ``CODEMODE_TOKENS``
environment variable (``owner=token,owner=token``; a bare token belongs to ``default``) or
``--token``; with none of these a token is generated and printed once. Anonymous access
exists only behind ``--insecure-allow-anonymous``.

With ``[gateway.oauth]`` the gateway also accepts access tokens of an OAuth 2.1 authorization
server (``codemode.gateway.oauth``) and publishes its protected resource metadata.

The check is an ASGI wrapper around the SDK's app: it puts the owner's name in the request
scope (``OWNER_SCOPE_KEY``), where ``server.caller_identity`` reads it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codemode.errors import ConfigError

__all__ = [
    "OWNER_SCOPE_KEY",
    "TOKENS_ENV",
    "BearerAuth",
    "ResourceMetadata",
    "TokenTable",
    "Verifier",
    "parse_token_list",
    "resolve_tokens",
]

OWNER_SCOPE_KEY = "codemode.owner"
TOKENS_ENV = "CODEMODE_TOKENS"
DEFAULT_OWNER = "default"

ASGIApp = Any  # (scope, receive, send) -> awaitable; starlette's types are not needed here
# A bearer token -> its owner, or None when the token is not accepted.
Verifier = Callable[[str], Awaitable[str | None]]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class TokenTable:
    """Token digests and their owners. Lookups compare every digest in constant time."""

    entries: tuple[tuple[bytes, str], ...]
    generated: str | None = None  # a token made for this run, to print once

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]]) -> TokenTable:
        entries: list[tuple[bytes, str]] = []
        for owner, token in pairs:
            if not owner or not token:
                raise ConfigError(
                    "a bearer token and its owner must both be non-empty",
                    key="gateway.tokens",
                    fix="write owner = token pairs, e.g. alice = '${ALICE_TOKEN}'",
                )
            entries.append((_digest(token), owner))
        return cls(tuple(entries))

    @classmethod
    def generate(cls) -> TokenTable:
        token = secrets.token_urlsafe(32)
        return cls(((_digest(token), DEFAULT_OWNER),), generated=token)

    async def verify(self, token: str) -> str | None:
        return self.owner_of(token)

    def owner_of(self, token: str) -> str | None:
        wanted = _digest(token)
        found: str | None = None
        for digest, owner in self.entries:
            if hmac.compare_digest(digest, wanted):
                found = owner
        return found

    def __len__(self) -> int:
        return len(self.entries)


def parse_token_list(text: str) -> list[tuple[str, str]]:
    """``owner=token,owner=token`` (a bare token belongs to ``default``)."""
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        owner, separator, token = item.partition("=")
        pairs.append((owner.strip(), token.strip()) if separator else (DEFAULT_OWNER, item))
    return pairs


def resolve_tokens(
    configured: Mapping[str, str],
    environ: Mapping[str, str],
    flags: Iterable[str],
    *,
    generate: bool = True,
) -> TokenTable:
    """Every token from config, environment and flags; a generated one if there is none
    (unless ``generate`` is false: another way to authenticate exists)."""
    pairs = list(configured.items())
    pairs += parse_token_list(environ.get(TOKENS_ENV, ""))
    for flag in flags:
        pairs += parse_token_list(flag)
    if pairs or not generate:
        return TokenTable.build(pairs)
    return TokenTable.generate()


@dataclass(frozen=True)
class ResourceMetadata:
    """What the gateway publishes about itself as an OAuth protected resource (RFC 9728)."""

    path: str  # served here
    url: str  # named in WWW-Authenticate
    document: Mapping[str, Any]


class BearerAuth:
    """Refuses HTTP requests without an accepted ``Authorization: Bearer`` token (401)."""

    def __init__(
        self,
        app: ASGIApp,
        verifiers: Sequence[Verifier],
        *,
        metadata: ResourceMetadata | None = None,
    ) -> None:
        self.app = app
        self.verifiers = tuple(verifiers)
        self.metadata = metadata

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        metadata = self.metadata
        if metadata is not None and scope.get("path") == metadata.path:
            await _respond(send, 200, dict(metadata.document), [])
            return
        owner = None
        token = _bearer(scope)
        if token:
            for verify in self.verifiers:
                owner = await verify(token)
                if owner is not None:
                    break
        if owner is None:
            await _refuse(send, metadata)
            return
        await self.app({**scope, OWNER_SCOPE_KEY: owner}, receive, send)


def _bearer(scope: Mapping[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


async def _refuse(send: Any, metadata: ResourceMetadata | None) -> None:
    challenge = 'Bearer realm="codemode", error="invalid_token"'
    if metadata is not None:
        challenge += f', resource_metadata="{metadata.url}"'
    body = {
        "error": "invalid_token",
        "error_description": "this codemode gateway needs `Authorization: Bearer <token>`; "
        "the token is printed when the gateway starts, or set in gateway.tokens / "
        f"{TOKENS_ENV}" + (", or an access token of its authorization server" if metadata else ""),
    }
    await _respond(send, 401, body, [(b"www-authenticate", challenge.encode())])


async def _respond(
    send: Any, status: int, payload: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

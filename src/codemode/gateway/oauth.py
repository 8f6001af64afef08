"""OAuth 2.1 resource-server mode: access tokens from an identity provider, checked by token
introspection (RFC 7662), as the MCP authorization spec describes for a resource server.

A token is accepted when the authorization server says it is active, it was issued for this
gateway (``aud`` names ``resource``) and it carries every required scope. Its owner is the
token's subject. Answers are cached until the token expires, at most ``CACHE_S``.
The gateway publishes its Protected Resource Metadata (RFC 9728) so clients find the server.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from codemode.config.model import OAuthSettings

__all__ = [
    "CACHE_S",
    "IntrospectionVerifier",
    "metadata_path",
    "metadata_url",
    "protected_resource_metadata",
]

log = logging.getLogger(__name__)

CACHE_S = 60.0
_MAX_CACHED = 10_000
_TIMEOUT_S = 10.0


def metadata_path(resource: str) -> str:
    """Where RFC 9728 puts the metadata of ``resource``: the well-known prefix + its path."""
    path = urlsplit(resource).path.rstrip("/")
    return "/.well-known/oauth-protected-resource" + path


def metadata_url(resource: str) -> str:
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{metadata_path(resource)}"


def protected_resource_metadata(settings: OAuthSettings) -> dict[str, Any]:
    return {
        "resource": settings.resource,
        "authorization_servers": [settings.issuer],
        "scopes_supported": list(settings.scopes),
        "bearer_methods_supported": ["header"],
    }


class IntrospectionVerifier:
    """``await verifier(token)`` -> the owner (``oauth:<subject>``), or None to refuse."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._cache: dict[bytes, tuple[float, str | None]] = {}

    async def __call__(self, token: str) -> str | None:
        key = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        answer = await self._introspect(token)
        if answer is None:
            return None  # not cached: the authorization server may answer next time
        owner = self._owner(answer)
        expires = answer.get("exp")
        ttl = CACHE_S
        if isinstance(expires, int | float):
            ttl = max(0.0, min(ttl, float(expires) - time.time()))
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[key] = (now + ttl, owner)
        return owner

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        import httpx2

        settings = self.settings
        auth = httpx2.BasicAuth(settings.client_id, settings.client_secret)
        try:
            async with httpx2.AsyncClient(
                timeout=_TIMEOUT_S, auth=auth if settings.client_id else None
            ) as http:
                response = await http.post(
                    settings.introspection_url,
                    data={"token": token, "token_type_hint": "access_token"},
                )
            response.raise_for_status()
            answer = response.json()
        except Exception as error:  # noqa: BLE001 - a token we cannot check is refused
            log.warning("token introspection at %s failed: %s", settings.introspection_url, error)
            return None
        return answer if isinstance(answer, dict) else None

    def _owner(self, answer: dict[str, Any]) -> str | None:
        if answer.get("active") is not True:
            return None
        audience = answer.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.settings.resource not in audiences:
            return None  # a token for another resource must not be replayed here
        granted = set(str(answer.get("scope") or "").split())
        if not set(self.settings.scopes) <= granted:
            return None
        subject = answer.get("sub") or answer.get("client_id")
        return f"oauth:{subject}" if isinstance(subject, str) and subject else None

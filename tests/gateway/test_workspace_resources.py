"""Files the user can see, through the official MCP client over streamable HTTP: a chart the
code made is a resource (listed with its size and MIME type, and read), comes back inline as an
image, is refused to another owner, and a planted link is never served."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

pytestmark = [pytest.mark.anyio, pytest.mark.thirdparty]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

CHART = """
import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(2, 2), dpi=50)
ax.bar(["q1", "q2"], [3, 5])
fig.savefig("chart.png")
with open("result.md", "w") as out:
    out.write("# Sales\\n\\nSee chart.png\\n")
os.symlink("/etc/passwd", "passwd.txt")
print("done")
"""


@pytest.fixture(scope="module")
async def gateway(gateway_dirs: Any, harness: Any) -> AsyncIterator[Any]:
    async with harness.open_gateway("http", gateway_dirs) as opened:
        yield opened


def _resources(listed: types.ListResourcesResult, session: str) -> dict[str, types.Resource]:
    return {r.name: r for r in listed.resources if f"/sessions/{session}/" in str(r.uri)}


async def test_a_chart_is_a_resource_of_its_owner_only(gateway: Any, harness: Any) -> None:
    alice_client = gateway.connect(headers=harness.bearer("alice"))
    bob_client = gateway.connect(headers=harness.bearer("bob"))
    async with alice_client as alice, bob_client as bob:
        made = await alice.call_tool("execute", {"code": CHART})
        data = harness.structured(made)
        assert data["status"] == "ok", harness.text_of(made)
        session = data["session"]
        # The result links the new files and carries the chart as a small image.
        links = {c.name: c for c in made.content if isinstance(c, types.ResourceLink)}
        assert {"chart.png", "result.md"} <= set(links)
        images = [c for c in made.content if isinstance(c, types.ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        inline = base64.b64decode(images[0].data)
        assert inline.startswith(PNG_MAGIC)

        found = _resources(await alice.list_resources(), session)
        assert found["chart.png"].mime_type == "image/png"
        assert found["chart.png"].size == len(inline)
        assert found["result.md"].mime_type == "text/markdown"
        assert "passwd.txt" not in found  # a link is not a file to serve

        chart = await alice.read_resource(links["chart.png"].uri)
        (contents,) = chart.contents
        assert isinstance(contents, types.BlobResourceContents)
        assert base64.b64decode(contents.blob) == inline
        report = await alice.read_resource(links["result.md"].uri)
        (text,) = report.contents
        assert isinstance(text, types.TextResourceContents)
        assert text.text == "# Sales\n\nSee chart.png\n"

        # Bob sees none of it and cannot read it by its URI.
        assert _resources(await bob.list_resources(), session) == {}
        with pytest.raises(MCPError, match="unknown or expired session"):
            await bob.read_resource(links["chart.png"].uri)

        # The planted link, asked for by name, is refused.
        planted = str(links["chart.png"].uri).replace("chart.png", "passwd.txt")
        with pytest.raises(MCPError) as refused:
            await alice.read_resource(planted)
        assert "root:" not in str(refused.value)
        assert "not a regular file" in str(refused.value)

"""Observed result shapes: inferred from what the sandbox receives, bounded, stored, shown."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.catalog.catalog import Catalog
from codemode.catalog.observed import SHAPES_FILE, ShapeBook, ShapeRecorder
from codemode.catalog.shapes import (
    MAX_DEPTH,
    MAX_KEYS,
    MAX_NODES,
    merge_shapes,
    render_shape,
    shape_of,
)
from codemode.config import CodemodeConfig
from codemode.config.model import GatewaySettings
from codemode.connectors.python import PythonConnector
from codemode.engine import Codemode
from codemode.sandbox.inprocess import InProcessSandboxes
from codemode.stubs import StubLibrary
from codemode.tools import ToolCall, ToolSpec

LEAD = {
    "id": 7,
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "score": 0.5,
    "tags": ["vip"],
    "owner": {"login": "bob", "active": True},
}


def test_a_shape_has_key_names_and_types_and_never_values() -> None:
    text = render_shape(shape_of(LEAD))
    assert text == (
        "{id: int, name: str, email: str, score: float, tags: list[str], "
        "owner: {login: str, active: bool}}"
    )
    assert "Ada" not in text and "example.com" not in text and "vip" not in text


def test_json_text_is_decoded_for_its_shape() -> None:
    text = render_shape(shape_of(json.dumps([LEAD, {**LEAD, "email": None}])))
    assert text.startswith("str holding JSON list[{id: int,")
    assert "email: str | None" in text
    assert "json.loads" in text


def test_merging_marks_keys_some_results_lack_and_widens_numbers() -> None:
    merged = merge_shapes(shape_of({"a": 1, "b": "x"}), shape_of({"a": 1.5, "c": None}))
    assert render_shape(merged) == "{a: float, b?: str, c?: None}"


def test_keys_that_are_data_are_never_recorded() -> None:
    by_email = {"ada@example.com": {"score": 1}, "bob@example.com": {"score": 2}}
    assert render_shape(shape_of(by_email)) == "dict[str, {score: int}]"
    wide = {f"k{i}": i for i in range(MAX_KEYS + 1)}
    assert render_shape(shape_of(wide)) == "dict[str, int]"
    scrubbed = shape_of({"Ada": 1}, scrub=lambda key: "<NAME_1>" if key == "Ada" else key)
    assert render_shape(scrubbed) == "dict[str, int]"


def test_depth_and_kinds_are_bounded() -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 3):
        deep = {"next": deep}
    assert "Any" in render_shape(shape_of(deep))
    kinds = [shape_of(v) for v in (1, "s", [1], {"a": 1}, True)]
    merged = kinds[0]
    for shape in kinds[1:]:
        merged = merge_shapes(merged, shape)
    assert render_shape(merged) == "Any"
    assert len(render_shape(shape_of({f"k{i}": "x" * 60 for i in range(20)}), limit=80)) == 80


class _Values:
    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
        return self.values.pop(0)


def test_the_recorder_records_the_first_results_then_fewer_while_nothing_changes() -> None:
    spec = ToolSpec("crm", "get_lead")
    book = ShapeBook(first=2, every=3, max_every=12)
    recorded = []
    for call in range(1, 40):
        if book.wants("crm", "get_lead"):
            recorded.append(call)
            book.observe(spec, {"a": 1}, scrub=None)
    # Each unchanged shape doubles the gap (3, 6, 12), up to max_every.
    assert recorded == [1, 2, 3, 9, 21, 33]
    assert book.wants("crm", "get_lead") is False
    changed = ShapeBook(first=0, every=3, max_every=12)
    assert changed.wants("crm", "get_lead")
    changed.observe(spec, {"a": 1}, scrub=None)  # new: the gap stays 3
    assert [changed.wants("crm", "get_lead") for _ in range(3)] == [False, False, True]


def test_the_recorder_stores_shapes_and_skips_tools_with_an_output_schema(tmp_path: Path) -> None:
    plain = ToolSpec("crm", "get_lead")
    typed = ToolSpec("crm", "typed", output_schema={"type": "object"})
    specs = {("crm", "get_lead"): plain, ("crm", "typed"): typed}
    book = ShapeBook(tmp_path / SHAPES_FILE, first=2, every=3)
    values = [{"a": 1}, {"b": 1}, {"c": 1}, {"d": 1}, {"e": 1}, {"x": 1}]
    recorder = ShapeRecorder(_Values(values), book, lambda s, t: specs.get((s, t)))
    for _ in range(5):
        recorder.invoke(ToolCall("crm", "get_lead", {}), timeout_s=1)
    # calls 1 and 2 (the first two) and 3 (then one in three) were recorded: a, b and c
    assert book.describe(plain) == "{a?: int, b?: int, c?: int}"
    recorder.invoke(ToolCall("crm", "typed", {}), timeout_s=1)
    assert book.describe(typed) is None
    again = ShapeBook(tmp_path / SHAPES_FILE)
    assert again.describe(plain) == "{a?: int, b?: int, c?: int}"
    changed = ToolSpec("crm", "get_lead", description="another definition")
    assert again.describe(changed) is None


def test_a_corrupt_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / SHAPES_FILE).write_text("{not json")
    assert ShapeBook(tmp_path / SHAPES_FILE).describe(ToolSpec("a", "b")) is None


def test_a_stub_follows_its_observed_shape_without_rebuilding_the_library() -> None:
    spec = ToolSpec("crm", "get_lead", description="Get a lead.")
    book = ShapeBook()
    library = StubLibrary([spec], observed=book)
    before = library.tool_source("crm", "get_lead")
    assert "Observed result shape" not in before
    book.observe(spec, LEAD, scrub=None)
    after = library.tool_source("crm", "get_lead")
    assert "Observed result shape" in after
    assert "login: str" in _words(after)
    compile(after, "get_lead.py", "exec")


pytestmark = pytest.mark.anyio


def _words(text: str) -> str:
    """The text with its line wrapping undone."""
    return " ".join(text.replace('"""', " ").split())


def get_lead() -> Any:  # no return annotation: no output schema
    """Get the lead."""
    return dict(LEAD)


def leads_text() -> Any:
    """All leads, as JSON text."""
    return json.dumps([LEAD])


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Codemode]:
    config = CodemodeConfig(servers={}, gateway=GatewaySettings(state_dir=tmp_path))
    catalog = Catalog([PythonConnector("crm", [get_lead, leads_text])])
    async with Codemode(
        config, catalog=catalog, sandboxes=InProcessSandboxes(), semantic=False
    ) as engine:
        yield engine


async def test_results_seen_by_the_code_reach_the_stub_and_search(
    engine: Codemode, tmp_path: Path
) -> None:
    answer = await engine.search("lead", detail="full")
    assert "Observed result shape" not in answer.text
    result = await engine.execute(
        "from servers import crm\nlead = crm.get_lead()\nprint(lead['email'])"
    )
    assert result.status == "ok", result.render_text()
    assert "ada@example.com" not in result.stdout  # tokenized before the code saw it
    answer = await engine.search("lead", detail="full")
    assert "Observed result shape" in answer.text
    assert "email: str" in answer.text
    stored = (tmp_path / SHAPES_FILE).read_text()
    assert "email" in stored
    assert "ada" not in stored.lower() and "lovelace" not in stored.lower()
    views = await engine.views()
    source = views.modules.module_source("servers.crm.get_lead")
    assert source is not None and "owner: {login: str, active: bool}" in _words(source.source)


async def test_json_text_results_show_their_decoded_shape(engine: Codemode) -> None:
    result = await engine.execute("from servers import crm\ntext = crm.leads_text()")
    assert result.status == "ok", result.render_text()
    views = await engine.views()
    source = _words(views.stubs.tool_source("crm", "leads_text"))
    assert "str holding JSON list[{id: int" in source


def test_one_observation_looks_at_a_bounded_number_of_values() -> None:
    wide: Any = [[[[{"a": 1, "b": [1] * 16}] * 16] * 16] * 16] * 16
    looked = []

    def scrub(key: str) -> str:
        looked.append(key)
        return key

    shape_of(wide, scrub=scrub)
    assert len(looked) <= MAX_NODES


def test_text_results_say_what_they_hold() -> None:
    assert render_shape(shape_of("[{'name': 'users'}]")) == (
        "str holding a Python literal list[{name: str}] (decode with ast.literal_eval)"
    )
    assert render_shape(shape_of("done")) == "str (plain text)"
    assert "errors come as ordinary text" in render_shape(shape_of("Database error: no such x"))
    # "[]" is JSON and a Python literal; with reprs seen too, ast.literal_eval reads both.
    merged = merge_shapes(shape_of("[]"), shape_of("[{'name': 'users'}]"))
    assert render_shape(merged).startswith("str holding a Python literal list[{name: str}]")
    with_plain = merge_shapes(shape_of("created users"), shape_of(None))
    assert render_shape(with_plain) == "str (plain text) | None"

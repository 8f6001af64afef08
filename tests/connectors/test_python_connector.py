"""PythonConnector: schemas from signatures and docstrings, calls sync and async."""

from __future__ import annotations

import asyncio
import typing
from typing import Literal

import pytest
from typing_extensions import TypedDict

from codemode.connectors.python import PythonConnector, parse_docstring
from codemode.errors import SchemaError, ToolNotFoundError

pytestmark = pytest.mark.anyio


class Point(TypedDict):
    x: int
    y: int


def scale(point: Point, factor: float = 2.0, mode: Literal["up", "down"] = "up") -> Point:
    """Scale a point.

    Args:
        point: The point to scale.
        factor (float): How much to scale
            it by.
        mode: Direction.
    """
    f = factor if mode == "up" else 1 / factor
    return {"x": int(point["x"] * f), "y": int(point["y"] * f)}


async def greet(name: str) -> str:
    """Say hello.

    Parameters
    ----------
    name : str
        Who to greet.
    """
    await asyncio.sleep(0)
    return f"hello {name}"


def explode() -> None:
    raise ValueError("boom")


async def test_schema_from_signature_hints_and_docstring():
    connector = PythonConnector("local", [scale, greet, explode])
    specs = {spec.name: spec for spec in await connector.list_tools()}
    assert list(specs) == ["scale", "greet", "explode"]
    schema = specs["scale"].input_schema
    assert schema["required"] == ["point"]
    props = schema["properties"]
    assert props["factor"] == {
        "type": "number",
        "default": 2.0,
        "description": "How much to scale it by.",
    }
    assert props["mode"]["enum"] == ["up", "down"]
    assert props["point"]["$ref"].endswith("Point")
    assert specs["scale"].description == "Scale a point."
    assert specs["scale"].source == "python"
    assert specs["scale"].output_schema is not None
    assert specs["greet"].input_schema["properties"]["name"]["description"] == "Who to greet."
    assert specs["explode"].output_schema is None


async def test_calls_sync_and_async_functions():
    connector = PythonConnector("local", {"scale": scale, "hello": greet, "explode": explode})
    result = await connector.call_tool("scale", {"point": {"x": 1, "y": 2}, "factor": 3})
    assert result.value == {"x": 3, "y": 6} and not result.is_error
    assert (await connector.call_tool("hello", {"name": "Ada"})).value == "hello Ada"
    failed = await connector.call_tool("explode", {})
    assert failed.is_error and failed.error_message == "ValueError: boom"
    invalid = await connector.call_tool("scale", {"point": {"x": "no"}})
    assert invalid.is_error and "invalid arguments" in (invalid.error_message or "")
    extra = await connector.call_tool("hello", {"name": "a", "nope": 1})
    assert extra.is_error
    with pytest.raises(ToolNotFoundError, match="use one of"):
        await connector.call_tool("missing", {})
    await connector.aclose()


def test_rejects_non_callables_and_duplicates():
    with pytest.raises(SchemaError, match="not a function"):
        PythonConnector("bad", {"x": 3})  # type: ignore[dict-item]
    with pytest.raises(SchemaError, match="two functions"):
        PythonConnector("bad", [greet, greet])
    with pytest.raises(SchemaError, match="cannot name"):
        PythonConnector("bad", [lambda: 1])


class OldStyle(typing.TypedDict):
    a: int


def takes_old_style(value: OldStyle) -> None:
    return None


def test_unusable_annotation_is_a_schema_error():
    with pytest.raises(SchemaError, match="typing_extensions"):
        PythonConnector("bad", [takes_old_style])


def test_parse_docstring_styles():
    summary, params = parse_docstring("Do it.\n\nArgs:\n    a: first\n    b (int): second\n")
    assert summary == "Do it." and params == {"a": "first", "b": "second"}
    summary, params = parse_docstring("Do it.\n\nParameters\n----------\na : int\n    first\n")
    assert summary == "Do it." and params == {"a": "first"}
    assert parse_docstring("") == ("", {})

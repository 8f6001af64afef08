"""The one formatter: a pydantic error as "file, key path, what is wrong, the fix, did you mean"."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import AfterValidator, Field, StrictBool, StrictStr

from codemode.config_model import (
    ConfigModel,
    Hint,
    PositiveNumber,
    WholeNumber,
    invalid,
    key_path,
    validate_section,
)
from codemode.errors import ConfigError


def _even(value: int) -> int:
    if value % 2:
        raise invalid(f"{value} is odd", f"write {value + 1}")
    return value


class Item(ConfigModel):
    name: StrictStr
    color: Annotated[Literal["red", "green", "blue"], Field(title="colour")] = "red"


class Box(ConfigModel):
    enabled: StrictBool = True
    size: PositiveNumber = 10.0
    count: Annotated[WholeNumber, Field(ge=0)] = 0
    pair: Annotated[WholeNumber, AfterValidator(_even)] = 2
    tags: Annotated[tuple[StrictStr, ...], Hint(expects="a list of tag names")] = ()
    items: tuple[Item, ...] = ()
    labels: Annotated[dict[StrictStr, Item], Hint(fix="write [box.labels.NAME] tables")] = Field(
        default_factory=dict
    )
    note: Annotated[StrictStr, Hint(fix='write note = "a few words"')] = ""


def error_for(data: object, *, prefix: str = "box") -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        validate_section(Box, data, source="/etc/box.toml", prefix=prefix)
    error = caught.value
    assert error.path == "/etc/box.toml" and str(error).startswith("/etc/box.toml, ")
    assert error.fix, "every config error says how to fix it"
    return error


@pytest.mark.parametrize(
    ("data", "key", "message", "fix"),
    [
        ({"enabeld": False}, "box.enabeld", "unknown key 'enabeld'", "did you mean 'enabled'?"),
        ({"zzz": 1}, "box.zzz", "unknown key 'zzz'", "use one of: count, enabled, items"),
        ({"enabled": "yes"}, "box.enabled", "must be true or false, not 'yes'", "enabled = true"),
        ({"size": 0}, "box.size", "must be a positive number, not 0", "size = 10"),
        ({"size": True}, "box.size", "must be a number, not true", "size = 10"),
        ({"count": -1}, "box.count", "must be 0 or more, not -1", "count = 1"),
        ({"count": 1.5}, "box.count", "must be a whole number, not 1.5", "count"),
        ({"pair": 3}, "box.pair", "3 is odd", "write 4"),
        ({"tags": "a"}, "box.tags", "must be a list of tag names, not 'a'", 'tags = ["a"]'),
        ({"tags": [1]}, "box.tags[0]", "must be a string, not 1", "quote"),
        (
            {"items": [{"name": "a"}, {}]},
            "box.items[1].name",
            "missing required key 'name'",
            "name =",
        ),
        (
            {"items": [{"name": "a", "color": "gren"}]},
            "box.items[0].color",
            "unknown colour 'gren'",
            "did you mean 'green'? use one of 'red' | 'green' | 'blue'",
        ),
        ({"items": ["a"]}, "box.items[0]", "must be a table/object, not 'a'", "[box.items[0]]"),
        ({"items": {"name": "a"}}, "box.items", "must be a list of tables", "items"),
        ({"labels": {"a.b": {"nme": "x"}}}, 'box.labels."a.b".nme', "unknown key", "'name'"),
        ({"labels": []}, "box.labels", "must be a table/object, not a list", "[box.labels.NAME]"),
        ({"note": 5}, "box.note", "must be a string, not 5", 'note = "a few words"'),
        ([], "box", "must be a table/object, not a list", "write [box]"),
    ],
)
def test_messages_name_the_key_path_what_is_wrong_and_the_fix(data, key, message, fix):
    error = error_for(data)
    assert error.key == key
    assert message in error.message
    assert fix in (error.fix or "")
    assert f"key {key!r}" in str(error)


def test_a_misspelt_key_is_reported_before_the_missing_key_it_was_meant_to_be():
    with pytest.raises(ConfigError) as caught:
        validate_section(Item, {"nmae": "a"}, source="f.toml", prefix="item")
    assert caught.value.key == "item.nmae"
    assert caught.value.fix == "did you mean 'name'?"


def test_no_prefix_gives_bare_keys():
    assert error_for({"enabeld": True}, prefix="").key == "enabeld"


def test_valid_data_passes_and_whole_floats_are_whole_numbers():
    box = validate_section(Box, {"count": 3.0, "size": 2, "tags": ["a"]}, source="f")
    assert (box.count, box.size, box.tags) == (3, 2.0, ("a",))
    assert isinstance(box.count, int)


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("rules", 1, "action"), "policy.rules[1].action"),
        (("per_tool", "mail.send"), 'policy.per_tool."mail.send"'),
        (("flows", "*"), 'policy.flows."*"'),
        (("fields", "my server", "[key]"), 'policy.fields."my server"'),
        (("a-b_c9",), "policy.a-b_c9"),
    ],
)
def test_key_paths_are_written_as_toml_would(loc, expected):
    assert key_path("policy", loc) == expected
    assert key_path("", ("x", 0)) == "x[0]"

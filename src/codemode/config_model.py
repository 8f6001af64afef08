"""The base of every config section model, and the one formatter of their errors.

Every table of a config file (``[servers.NAME]``, ``[sandbox]``, ``[policy]``...) is a pydantic
model deriving from ``ConfigModel``: frozen, unknown keys forbidden. ``validate_section`` checks a
raw table (as ``tomllib`` or ``json.loads`` give it) against one and turns the first problem into
a ``ConfigError`` naming the file, the key path (``policy.rules[1].action``: indices from 0, keys
quoted as TOML would), what is wrong and the fix, with "did you mean" for misspelt keys and
values.

A model says more about a key with ``Hint`` in its annotation (what the key expects, how to fix
it); a validator that checks more than a type raises ``invalid(message, fix)``.
"""

from __future__ import annotations

import difflib
import json
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from codemode.errors import ConfigError

__all__ = [
    "ConfigModel",
    "Hint",
    "PositiveNumber",
    "PositiveWholeNumber",
    "WholeNumber",
    "config_error",
    "did_you_mean",
    "invalid",
    "key_path",
    "show_value",
    "validate_section",
]

M = TypeVar("M", bound=BaseModel)

_CUSTOM = "config_value"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# Errors that mean "this is not the type the key wants".
_TYPE_ERRORS = frozenset(
    {"bool_parsing", "bool_type", "dict_type", "float_parsing", "float_type", "int_from_float"}
    | {"int_parsing", "int_type", "list_type", "model_type", "path_type", "string_type"}
    | {"tuple_type"}
)


class ConfigModel(BaseModel):
    """A table of a config file: frozen, and an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class Hint:
    """Annotation metadata: what a key expects ("a list of tool name patterns") and its fix."""

    expects: str | None = None
    fix: str | None = None


def invalid(message: str, fix: str) -> PydanticCustomError:
    """The error a config validator raises: ``raise invalid("what is wrong", "the fix")``."""
    return PydanticCustomError(_CUSTOM, "{message}", {"message": message, "fix": fix})


def _integral_float(value: object) -> object:
    # TOML writes 2e9 as a float: a whole number in float form is still a whole number.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[StrictInt, BeforeValidator(_integral_float)]
PositiveWholeNumber = Annotated[WholeNumber, Field(gt=0)]
PositiveNumber = Annotated[StrictFloat, Field(gt=0)]


def validate_section(
    model: type[M],
    data: object,
    *,
    source: str,
    prefix: str = "",
    context: Mapping[str, Any] | None = None,
) -> M:
    """``data`` as ``model``, or ``ConfigError`` for its first problem (keys under ``prefix``)."""
    try:
        return model.model_validate(data, context=dict(context) if context else None)
    except PydanticValidationError as error:
        raise config_error(error, model, source=source, prefix=prefix) from None


def config_error(
    error: PydanticValidationError, model: type[BaseModel], *, source: str, prefix: str = ""
) -> ConfigError:
    """The one formatter: a pydantic error on ``model`` as a ``ConfigError`` for ``source``."""
    # A misspelt key also makes the key it was meant to be "missing": report the spelling.
    details = sorted(error.errors(), key=lambda d: d["type"] != "extra_forbidden")
    detail = details[0]
    loc = tuple(detail["loc"])
    key = key_path(prefix, loc)
    message, fix = _explain(detail, _spot(model, loc), key)
    return ConfigError(message, path=source, key=key or None, fix=fix)


def key_path(prefix: str, loc: Sequence[str | int]) -> str:
    """``("rules", 1, "action")`` under ``policy`` -> ``policy.rules[1].action``."""
    text = prefix
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the dict key itself failed"
            continue
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        piece = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
        text = f"{text}.{piece}" if text else piece
    return text


def did_you_mean(word: object, choices: Sequence[str]) -> str | None:
    if not isinstance(word, str):
        return None
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]!r}?" if close else None


def show_value(value: object) -> str:
    """A value as the config file spells it: ``'no'``, ``3``, ``true``, ``a list``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return "null" if value is None else type(value).__name__


# --- where in the model an error is -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spot:
    annotation: Any  # the type expected there (None for an unknown key)
    hints: tuple[Hint, ...]
    name: str | None  # the last key of the path
    field: FieldInfo | None  # the last model field on the path
    parent: type[BaseModel] | None  # the model holding the last key


def _spot(model: type[BaseModel], loc: tuple[str | int, ...]) -> _Spot:
    annotation: Any = model
    extra: tuple[Hint, ...] = ()  # hints a model field carries outside its annotation
    name: str | None = None
    field: FieldInfo | None = None
    parent: type[BaseModel] | None = None
    parts = list(loc)
    index = 0
    while index < len(parts):
        part = parts[index]
        base, _hints = _unwrap(annotation)
        origin = get_origin(base)
        if isinstance(base, type) and issubclass(base, BaseModel):
            parent, name = base, str(part)
            field = _field(base, name)
            if field is None:
                return _Spot(None, (), name, None, parent)
            annotation = field.annotation
            extra = tuple(item for item in field.metadata if isinstance(item, Hint))
        elif origin in (list, tuple, Sequence) and isinstance(part, int):
            annotation, extra = get_args(base)[0], ()
        elif origin in (dict, Mapping) and isinstance(part, str):
            key_type, value_type = get_args(base)
            name, extra = part, ()
            if index + 1 < len(parts) and parts[index + 1] == "[key]":
                annotation, index = key_type, index + 1
            else:
                annotation = value_type
        else:
            break
        index += 1
    _base, hints = _unwrap(annotation)
    return _Spot(annotation, extra + hints, name, field, parent)


def _field(model: type[BaseModel], key: str) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _unwrap(annotation: Any) -> tuple[Any, tuple[Hint, ...]]:
    """``Annotated[X | None, Hint(...)]`` -> ``(X, (Hint(...),))``."""
    hints: list[Hint] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            hints.extend(item for item in annotation.__metadata__ if isinstance(item, Hint))
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            arms = [arm for arm in get_args(annotation) if arm is not type(None)]
            if len(arms) != 1:
                break
            annotation = arms[0]
        else:
            break
    return annotation, tuple(hints)


def _expects(annotation: Any) -> str:
    base, hints = _unwrap(annotation)
    for hint in hints:
        if hint.expects:
            return hint.expects
    origin = get_origin(base)
    if origin is Literal:
        return "one of " + " | ".join(repr(choice) for choice in get_args(base))
    if origin in (list, tuple, Sequence):
        element = _expects(get_args(base)[0])
        return "a list of " + _PLURALS.get(element, "values")
    if origin in (dict, Mapping) or (isinstance(base, type) and issubclass(base, BaseModel)):
        return "a table/object"
    return _SINGULARS.get(base, "a valid value")


_SINGULARS: dict[Any, str] = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    Path: "a path string",
}
_PLURALS = {
    "a whole number": "whole numbers",
    "a number": "numbers",
    "a string": "strings",
    "a table/object": "tables",
}


# --- what is wrong and the fix ------------------------------------------------------------------


def _explain(detail: ErrorDetails, spot: _Spot, key: str) -> tuple[str, str]:
    kind = detail["type"]
    ctx: dict[str, Any] = dict(detail.get("ctx") or {})
    value = detail.get("input")
    name = spot.name or key or "the value"
    hint_fix = next((hint.fix for hint in spot.hints if hint.fix), None)
    if kind == _CUSTOM:
        return str(ctx["message"]), str(ctx["fix"])
    if kind == "extra_forbidden":
        known = [f.alias or n for n, f in spot.parent.model_fields.items()] if spot.parent else []
        fix = did_you_mean(name, known) or f"use one of: {', '.join(sorted(known))}"
        return f"unknown key {name!r}", fix
    if kind == "missing":
        return f"missing required key {name!r}", hint_fix or f"add {name} = {_example(spot)}"
    if kind == "literal_error":
        choices = [str(choice) for choice in get_args(_unwrap(spot.annotation)[0])]
        title = spot.field.title if spot.field is not None and spot.field.title else "value"
        one_of = "use one of " + " | ".join(repr(choice) for choice in choices)
        close = did_you_mean(value, choices)
        return f"unknown {title} {show_value(value)}", f"{close} {one_of}" if close else one_of
    if kind in _TYPE_ERRORS:
        expects = next((hint.expects for hint in spot.hints if hint.expects), None)
        expects = expects or _expects(spot.annotation)
        return f"must be {expects}, not {show_value(value)}", _type_fix(
            spot, value, name, key, hint_fix
        )
    if kind in ("greater_than", "greater_than_equal"):
        return f"{_bound(kind, ctx)}, not {show_value(value)}", hint_fix or _number_fix(spot, name)
    if kind == "too_short":
        return "must not be empty", hint_fix or f"give {name} a value, or remove it"
    if kind == "string_too_short":
        return "must not be an empty string", hint_fix or "write a value, or remove it"
    return detail["msg"], hint_fix or f"correct {key or 'the file'} (see the documentation)"


def _type_fix(spot: _Spot, value: object, name: str, key: str, hint_fix: str | None) -> str:
    base = _unwrap(spot.annotation)[0]
    origin = get_origin(base)
    if origin in (list, tuple, Sequence) and isinstance(value, str):
        return f"write {name} = [{json.dumps(value)}]"
    if hint_fix:
        return hint_fix
    if origin in (dict, Mapping) or (isinstance(base, type) and issubclass(base, BaseModel)):
        return f"write [{key}] with keys below it (TOML) or an object (JSON)"
    if base is bool:
        return f"write {name} = true or {name} = false"
    if base in (int, float):
        return _number_fix(spot, name)
    if base is str:
        return f'quote the value: {name} = "..."'
    return f"write {name} as {_expects(spot.annotation)}"


def _bound(kind: str, ctx: Mapping[str, Any]) -> str:
    if kind == "greater_than":
        return "must be a positive number" if ctx["gt"] == 0 else f"must be above {ctx['gt']}"
    wanted = {0: "must be 0 or more", 1: "must be a positive whole number"}
    return wanted.get(ctx["ge"], f"must be at least {ctx['ge']}")


def _number_fix(spot: _Spot, name: str) -> str:
    default = spot.field.default if spot.field is not None else None
    if isinstance(default, int | float) and not isinstance(default, bool) and default > 0:
        shown = int(default) if float(default).is_integer() else default
        return f"write e.g. {name} = {shown}"
    return f"write a number, e.g. {name} = 1"


def _example(spot: _Spot) -> str:
    base = _unwrap(spot.annotation)[0]
    origin = get_origin(base)
    if origin is Literal:
        return " | ".join(json.dumps(choice) for choice in get_args(base))
    if origin in (list, tuple, Sequence):
        return '["..."]'
    if base in (int, float):
        return "1"
    if base is bool:
        return "true"
    return '"..."'

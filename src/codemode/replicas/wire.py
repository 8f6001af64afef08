"""An execution result as JSON, for a replica that hands it to another one."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from codemode.sandbox.result import ExecutionResult

__all__ = ["result_from_json", "result_to_json"]

_FIELDS = tuple(item.name for item in fields(ExecutionResult) if item.name != "captured_stdout")


def result_to_json(result: ExecutionResult) -> bytes:
    data = {name: getattr(result, name) for name in _FIELDS}
    return json.dumps({"result": data}, default=repr).encode()


def result_from_json(data: dict[str, Any]) -> ExecutionResult:
    return ExecutionResult(**{name: data[name] for name in _FIELDS if name in data})

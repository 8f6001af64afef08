"""An execution result as JSON, for a replica that hands it to another one."""

from __future__ import annotations

import json
from typing import Any

from codemode.sandbox.result import ExecutionResult

__all__ = ["result_from_json", "result_to_json"]


def result_to_json(result: ExecutionResult) -> bytes:
    return json.dumps({"result": result.to_dict()}, default=repr).encode()


def result_from_json(data: dict[str, Any]) -> ExecutionResult:
    return ExecutionResult.from_dict(data)

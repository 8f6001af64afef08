"""Checks of the agent's code before it runs: calls on ``servers.*`` against their signatures."""

from codemode.checks.calls import CallProblem, check_calls
from codemode.checks.signatures import Param, SignatureTable, ToolSignature

__all__ = ["CallProblem", "Param", "SignatureTable", "ToolSignature", "check_calls"]

"""Model providers behind one seam (``ModelProvider``), and ``make_provider`` to pick one."""

from __future__ import annotations

from pathlib import Path

from codemode.agent.providers.base import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    ToolDefinition,
)
from codemode.agent.providers.scripted import (
    RecordingModel,
    ReplayModel,
    ScriptedModel,
    load_script,
)
from codemode.settings.agent import ModelRef, ModelSettings, parse_model_ref

__all__ = [
    "Message",
    "ModelProvider",
    "ModelReply",
    "ModelRequest",
    "RecordingModel",
    "ReplayModel",
    "ScriptedModel",
    "ToolCallRequest",
    "ToolDefinition",
    "make_provider",
]


def make_provider(ref: str | ModelRef, settings: ModelSettings | None = None) -> ModelProvider:
    """``anthropic:NAME``, ``openai:NAME``, ``scripted:PATH`` (a JSON list of answers) or
    ``replay:PATH`` (a recorded transcript). A missing key is a ``ModelConfigError`` now,
    before any work starts."""
    ref = parse_model_ref(ref) if isinstance(ref, str) else ref
    settings = settings or ModelSettings()
    if ref.provider == "anthropic":
        from codemode.agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(ref.name, settings)
    if ref.provider == "openai":
        from codemode.agent.providers.openai import OpenAIProvider

        return OpenAIProvider(ref.name, settings)
    if ref.provider == "scripted":
        path = Path(ref.name).expanduser()
        return ScriptedModel(load_script(path), name=f"scripted:{path.name}")
    return ReplayModel(Path(ref.name).expanduser())

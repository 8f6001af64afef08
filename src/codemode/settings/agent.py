"""The ``[agent]`` config table: the default model, the round cap, and settings per model.

```toml
[agent]
model = "anthropic:claude-sonnet-4-5"     # PROVIDER:NAME; --model overrides it
max_rounds = 8
run_timeout_s = 900                       # the whole run; --run-timeout overrides it

[agent.models."openai:*"]                 # exact names or globs; the first match wins
format = "tools"                          # tools | json | fenced
[agent.models."openai:smollm2*"]
format = "fenced"                         # small models do better with plain code
base_url = "http://127.0.0.1:8080/v1"
context_tokens = 2048
```
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from codemode.config_model import ConfigModel, Hint, PositiveNumber, PositiveWholeNumber
from codemode.errors import ModelConfigError

__all__ = [
    "PROVIDERS",
    "AgentSettings",
    "ModelRef",
    "ModelSettings",
    "OutputFormatName",
    "parse_model_ref",
]

OutputFormatName = Literal["tools", "json", "fenced"]
PROVIDERS = ("anthropic", "openai", "scripted", "replay")


class ModelSettings(ConfigModel):
    """``[agent.models."PROVIDER:NAME"]``: how to talk to one model (or a glob of them)."""

    # tools: native tool calling; json: {"thoughts", "code"}; fenced: a ```python block.
    format: OutputFormatName | None = None
    base_url: Annotated[str | None, Hint(fix='write base_url = "http://127.0.0.1:8080/v1"')] = None
    # The environment variable holding the key (default: the provider's usual one).
    api_key_env: str | None = None
    max_tokens: Annotated[PositiveWholeNumber, Field(ge=16)] = 4096
    temperature: Annotated[float | None, Field(ge=0, le=2)] = None
    # The conversation is kept under this many tokens: oldest results are shortened first.
    context_tokens: Annotated[PositiveWholeNumber, Field(ge=512)] = 100_000
    timeout_s: PositiveNumber = 120.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 4


class AgentSettings(ConfigModel):
    """``[agent]``: the default model of ``codemode run``, the round cap, settings per model."""

    model: Annotated[str, Hint(fix='write model = "anthropic:claude-sonnet-4-5"')] = (
        "anthropic:claude-sonnet-4-5"
    )
    max_rounds: Annotated[PositiveWholeNumber, Field(le=200)] = 8
    # Wall-time limit of one execution (default: the sandbox's limit).
    execution_timeout_s: PositiveNumber | None = None
    # Wall-time limit of a whole run: no model call or retry outlasts it (--run-timeout).
    run_timeout_s: PositiveNumber = 900.0
    models: dict[str, ModelSettings] = Field(default_factory=dict)

    def for_model(self, ref: str) -> ModelSettings:
        """The settings of ``ref``: an exact key first, then the first glob that matches."""
        if ref in self.models:
            return self.models[ref]
        for pattern, settings in self.models.items():
            if fnmatch.fnmatchcase(ref, pattern):
                return settings
        return ModelSettings()


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str
    name: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"


def parse_model_ref(text: str) -> ModelRef:
    """``"openai:gpt-4o-mini"`` -> ModelRef("openai", "gpt-4o-mini")."""
    provider, sep, name = text.partition(":")
    provider = provider.strip().lower()
    if not sep or not name.strip():
        raise ModelConfigError(
            f"model {text!r} is not PROVIDER:NAME",
            fix="write e.g. --model anthropic:claude-sonnet-4-5 or --model openai:gpt-4o-mini",
        )
    if provider not in PROVIDERS:
        raise ModelConfigError(
            f"unknown model provider {provider!r} in {text!r}",
            fix=f"use one of: {', '.join(PROVIDERS)} (openai covers any OpenAI-compatible "
            "server: vLLM, llama.cpp, Ollama; set OPENAI_BASE_URL)",
        )
    return ModelRef(provider, name.strip())

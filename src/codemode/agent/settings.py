"""The ``[agent]`` config table: the default model, the round cap, and settings per model.

```toml
[agent]
model = "anthropic:claude-sonnet-4-5"     # PROVIDER:NAME; --model overrides it
max_rounds = 8

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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codemode.errors import ConfigError, ModelConfigError

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


class ModelSettings(BaseModel):
    """How to talk to one model. Unset values take the provider's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # tools: native tool calling; json: {"thoughts", "code"}; fenced: a ```python block.
    format: OutputFormatName | None = None
    base_url: str | None = None
    # The environment variable holding the key (default: the provider's usual one).
    api_key_env: str | None = None
    max_tokens: int = Field(default=4096, ge=16)
    temperature: float | None = Field(default=None, ge=0, le=2)
    # The conversation is kept under this many tokens: oldest results are shortened first.
    context_tokens: int = Field(default=100_000, ge=512)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)


class AgentSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "anthropic:claude-sonnet-4-5"
    max_rounds: int = Field(default=8, ge=1, le=200)
    # Wall-time limit of one execution (default: the sandbox's limit).
    execution_timeout_s: float | None = Field(default=None, gt=0)
    models: dict[str, ModelSettings] = Field(default_factory=dict)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "config") -> AgentSettings:
        """Validate the ``[agent]`` table; a mistake is a ``ConfigError`` naming the key."""
        try:
            return cls.model_validate(dict(table))
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(["agent", *(str(part) for part in first["loc"])])
            fix = (
                "remove it; known keys: " + ", ".join(_known_keys(first["loc"]))
                if first["type"] == "extra_forbidden"
                else "see the [agent] section in the README"
            )
            raise ConfigError(first["msg"], path=source, key=key, fix=fix) from None

    def for_model(self, ref: str) -> ModelSettings:
        """The settings of ``ref``: an exact key first, then the first glob that matches."""
        if ref in self.models:
            return self.models[ref]
        for pattern, settings in self.models.items():
            if fnmatch.fnmatchcase(ref, pattern):
                return settings
        return ModelSettings()


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    if "models" in loc[:1]:
        return sorted(ModelSettings.model_fields)
    return sorted(AgentSettings.model_fields)


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

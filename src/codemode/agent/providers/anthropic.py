"""Anthropic Messages API over httpx2 (no SDK needed).

The key comes from ``ANTHROPIC_API_KEY`` (or the variable named by ``api_key_env``), the base URL
from the config's ``base_url``, else ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``,
as the official SDK finds them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import anyio
import httpx2

from codemode.agent.providers.base import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
)
from codemode.agent.providers.http import HttpSettings, Sleep, model_client, post_json
from codemode.errors import ModelConfigError, ModelError
from codemode.settings.agent import ModelSettings

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class AnthropicProvider(ModelProvider):
    supports_tools = True

    def __init__(
        self,
        model: str,
        settings: ModelSettings | None = None,
        *,
        env: Mapping[str, str] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        settings = settings or ModelSettings()
        env = os.environ if env is None else env
        self.model = model
        self.name = f"anthropic:{model}"
        self.settings = settings
        key_env = settings.api_key_env or "ANTHROPIC_API_KEY"
        api_key = env.get(key_env)
        if not api_key:
            raise ModelConfigError(
                f"no Anthropic API key: {key_env} is not set",
                fix=f"export {key_env}=sk-ant-... (or choose another model with --model)",
            )
        self.api_key = api_key
        self.base_url = (
            settings.base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL
        ).rstrip("/")
        self._http = HttpSettings(
            max_retries=settings.max_retries,
            label=f"the Anthropic API at {self.base_url}",
            model=model,
            key_hint=f"check {key_env}",
        )
        self._client = model_client(settings.timeout_s, transport)
        self._sleep = sleep

    async def complete(self, request: ModelRequest) -> ModelReply:
        body: dict[str, Any] = {
            "model": self.model,
            "system": request.system,
            "messages": wire_messages(request.messages),
            "max_tokens": request.max_tokens,
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if request.tools:
            body["tools"] = [tool.to_json() for tool in request.tools]
        data = await post_json(
            self._client,
            f"{self.base_url}/v1/messages",
            headers={"x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION},
            body=body,
            settings=self._http,
            sleep=self._sleep,
            timeout_s=request.timeout_s,
        )
        return _reply(data)

    async def aclose(self) -> None:
        await self._client.aclose()


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.text,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments or {}}
        for call in message.tool_calls
    ]
    return blocks


def wire_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Anthropic wants alternating user/assistant turns: tool results are user content, and
    consecutive turns of one side are merged (tool results first, as the API requires)."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message) or [{"type": "text", "text": "(empty)"}]
        if wire and wire[-1]["role"] == role:
            merged = wire[-1]["content"] + blocks
            merged.sort(key=lambda b: 0 if b["type"] == "tool_result" else 1)
            wire[-1]["content"] = merged
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def _reply(data: dict[str, Any]) -> ModelReply:
    content = data.get("content")
    if not isinstance(content, list):
        raise ModelError(f"the answer has no content list: {str(data)[:300]}")
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            arguments = block.get("input")
            calls.append(
                ToolCallRequest(
                    str(block.get("id", f"toolu_{len(calls)}")),
                    str(block.get("name", "")),
                    arguments if isinstance(arguments, dict) else None,
                    None if isinstance(arguments, dict) else str(arguments)[:10_000],
                )
            )
    usage = data.get("usage") or {}
    tokens_in = int(usage.get("input_tokens") or 0)
    tokens_in += int(usage.get("cache_read_input_tokens") or 0)
    tokens_in += int(usage.get("cache_creation_input_tokens") or 0)
    return ModelReply(
        text="\n".join(t for t in texts if t),
        tool_calls=tuple(calls),
        tokens_in=tokens_in,
        tokens_out=int(usage.get("output_tokens") or 0),
        stop_reason=data.get("stop_reason"),
    )

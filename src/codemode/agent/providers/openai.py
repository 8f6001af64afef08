"""OpenAI-compatible Chat Completions: OpenAI, vLLM, llama.cpp's server, Ollama, LM Studio...

The base URL and key are found as the official ``openai`` SDK finds them: the config's
``base_url`` (else ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``) and the
``OPENAI_API_KEY`` variable (or the one named by ``api_key_env``). A key is required for
OpenAI's own API; a server at another URL is called without one when none is set.
"""

from __future__ import annotations

import json
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
    count_text_tokens,
    reply_text_for_count,
    request_text_for_count,
)
from codemode.agent.providers.http import HttpSettings, Sleep, model_client, post_json
from codemode.errors import ModelConfigError, ModelError
from codemode.settings.agent import ModelSettings

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAIProvider"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIProvider(ModelProvider):
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
        self.name = f"openai:{model}"
        self.settings = settings
        self.base_url = (
            settings.base_url or env.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        ).rstrip("/")
        key_env = settings.api_key_env or "OPENAI_API_KEY"
        self.api_key = env.get(key_env) or None
        if self.api_key is None and self.base_url == DEFAULT_OPENAI_BASE_URL:
            raise ModelConfigError(
                f"no OpenAI API key: {key_env} is not set",
                fix=f"export {key_env}=sk-...; for another OpenAI-compatible server set "
                "OPENAI_BASE_URL (or base_url in [agent.models]) to its URL",
            )
        self._http = HttpSettings(
            max_retries=settings.max_retries,
            label=f"the OpenAI-compatible server at {self.base_url}",
            model=model,
            key_hint=f"check {key_env}",
        )
        self._client = model_client(settings.timeout_s, transport)
        self._sleep = sleep

    async def complete(self, request: ModelRequest) -> ModelReply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(request),
            "max_tokens": request.max_tokens,
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                }
                for tool in request.tools
            ]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = await post_json(
            self._client,
            f"{self.base_url}/chat/completions",
            headers=headers,
            body=body,
            settings=self._http,
            sleep=self._sleep,
            timeout_s=request.timeout_s,
        )
        return _reply(data, request)

    async def aclose(self) -> None:
        await self._client.aclose()


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    system: dict[str, Any] = {"role": "system", "content": request.system}
    return [system, *(_message(message) for message in request.messages)]


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": (
                            call.raw_arguments
                            if call.arguments is None
                            else json.dumps(call.arguments, ensure_ascii=False)
                        ),
                    },
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.text}


def _reply(data: dict[str, Any], request: ModelRequest) -> ModelReply:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(
            f"the answer has no choices: {json.dumps(data)[:300]}",
            fix="check that the server speaks the Chat Completions API",
        )
    choice = choices[0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    if not isinstance(text, str):  # some servers send content parts
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    calls = []
    for index, item in enumerate(message.get("tool_calls") or []):
        raw: dict[str, Any] = item if isinstance(item, dict) else {}
        function: dict[str, Any] = raw["function"] if isinstance(raw.get("function"), dict) else {}
        arguments_text = function.get("arguments")
        arguments: dict[str, Any] | None
        raw_arguments: str | None = None
        if isinstance(arguments_text, dict):
            arguments = arguments_text
        else:
            try:
                parsed = json.loads(arguments_text or "{}")
            except (TypeError, ValueError):
                parsed = None
            arguments = parsed if isinstance(parsed, dict) else None
            if arguments is None:
                raw_arguments = str(arguments_text)[:10_000]
        calls.append(
            ToolCallRequest(
                str(raw.get("id") or f"call_{index}"),
                str(function.get("name") or ""),
                arguments,
                raw_arguments,
            )
        )
    usage = data.get("usage") or {}
    reply = ModelReply(
        text=text,
        tool_calls=tuple(calls),
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        stop_reason=choice.get("finish_reason"),
    )
    if not usage:  # a server that reports no usage: count with our tokenizer
        reply = ModelReply(
            reply.text,
            reply.tool_calls,
            sum(count_text_tokens(piece) for piece in request_text_for_count(request)),
            count_text_tokens(reply_text_for_count(reply)),
            reply.stop_reason,
        )
    return reply

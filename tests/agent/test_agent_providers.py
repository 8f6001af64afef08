"""The model providers on the wire, against in-memory HTTP twins (httpx2.MockTransport): request
shapes, replies, retries with backoff, and the errors for keys, models and context length.
The OpenAI-compatible provider also runs against a real llama.cpp server (test_agent_local_model)."""

from __future__ import annotations

import json

import httpx2
import pytest

from codemode.agent.formats import EXECUTE_TOOL, SEARCH_TOOL
from codemode.agent.providers import make_provider
from codemode.agent.providers.anthropic import AnthropicProvider
from codemode.agent.providers.base import Message, ModelRequest, ToolCallRequest
from codemode.agent.providers.openai import OpenAIProvider
from codemode.errors import ContextLengthError, ModelConfigError, ModelError
from codemode.settings.agent import ModelSettings

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(
    system="be brief",
    messages=(
        Message("user", "count the rows", kind="task"),
        Message(
            "assistant",
            "plan: read it",
            (ToolCallRequest("c1", "execute", {"code": "print(1)"}),),
            kind="reply",
        ),
        Message("tool", "status: ok", tool_call_id="c1", kind="result"),
    ),
    tools=(SEARCH_TOOL, EXECUTE_TOOL),
    max_tokens=256,
)


class Server:
    """Records requests; answers with the queued responses in order."""

    def __init__(self, *responses: httpx2.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    def body(self, index: int = 0) -> dict:
        return json.loads(self.requests[index].content)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def openai(server: Server, env: dict[str, str], sleeps: Sleeps | None = None, **settings):
    return OpenAIProvider(
        "gpt-test",
        ModelSettings(**settings),
        env=env,
        transport=httpx2.MockTransport(server),
        sleep=sleeps or Sleeps(),
    )


def chat_reply(message: dict, usage: dict | None = None) -> httpx2.Response:
    body = {"choices": [{"message": message, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return httpx2.Response(200, json=body)


KEYED = {"OPENAI_API_KEY": "sk-test"}


async def test_openai_sends_tools_named_search_and_execute_and_reads_tool_calls():
    server = Server(
        chat_reply(
            {
                "content": "I will run it",
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "execute", "arguments": '{"code": "print(2)"}'},
                    }
                ],
            },
            {"prompt_tokens": 120, "completion_tokens": 9},
        )
    )
    provider = openai(server, KEYED)
    reply = await provider.complete(REQUEST)
    await provider.aclose()
    body = server.body()
    assert [t["function"]["name"] for t in body["tools"]] == ["search", "execute"]
    assert body["tools"][1]["function"]["parameters"]["required"] == ["code"]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"code": "print(1)"}'
    assert body["messages"][3]["tool_call_id"] == "c1"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert reply.text == "I will run it"
    assert reply.tool_calls == (ToolCallRequest("c2", "execute", {"code": "print(2)"}),)
    assert (reply.tokens_in, reply.tokens_out) == (120, 9)


async def test_openai_honours_openai_base_url_and_key_from_the_environment():
    server = Server(chat_reply({"content": "hi"}))
    provider = openai(
        server, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/", "OPENAI_API_KEY": "local"}
    )
    await provider.complete(REQUEST)
    await provider.aclose()
    assert str(server.requests[0].url) == "http://127.0.0.1:9/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer local"


async def test_openai_needs_a_key_for_openai_itself_and_says_how_to_set_it():
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY") as raised:
        OpenAIProvider("gpt-test", env={})
    assert "export OPENAI_API_KEY" in str(raised.value)


async def test_openai_compatible_server_without_a_key_gets_no_authorization_header():
    server = Server(chat_reply({"content": "hi"}))
    provider = openai(server, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    await provider.complete(REQUEST)
    await provider.aclose()
    assert "authorization" not in server.requests[0].headers


async def test_openai_counts_tokens_when_the_server_reports_none():
    server = Server(chat_reply({"content": "hello there"}))
    provider = openai(server, KEYED)
    reply = await provider.complete(REQUEST)
    await provider.aclose()
    assert reply.tokens_in > 50 and reply.tokens_out > 0


async def test_arguments_that_are_not_json_are_kept_raw_for_the_loop_to_correct():
    bad = {"id": "c", "function": {"name": "execute", "arguments": "{code: print(1)"}}
    server = Server(chat_reply({"content": None, "tool_calls": [bad]}))
    provider = openai(server, KEYED)
    reply = await provider.complete(REQUEST)
    await provider.aclose()
    assert reply.tool_calls[0].arguments is None
    assert reply.tool_calls[0].raw_arguments == "{code: print(1)"


async def test_rate_limits_and_server_errors_are_retried_with_backoff():
    server = Server(
        httpx2.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "slow"}}),
        httpx2.Response(503, json={"error": {"message": "overloaded"}}),
        chat_reply({"content": "finally"}),
    )
    sleeps = Sleeps()
    provider = openai(server, KEYED, sleeps)
    reply = await provider.complete(REQUEST)
    await provider.aclose()
    assert reply.text == "finally"
    assert len(server.requests) == 3
    assert sleeps.waits[0] == 3.0  # Retry-After honoured
    assert 0.5 <= sleeps.waits[1] <= 3.0  # backoff with jitter (2 s +- 50%)


async def test_retries_end_with_a_clear_error():
    server = Server(*[httpx2.Response(500, json={"error": {"message": "boom"}})] * 3)
    provider = openai(server, KEYED, max_retries=2)
    with pytest.raises(ModelError, match="failed 3 times; last: HTTP 500: boom"):
        await provider.complete(REQUEST)
    await provider.aclose()


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        (httpx2.Response(401, json={"error": {"message": "bad key"}}), ModelConfigError, "refused"),
        (
            httpx2.Response(404, json={"error": {"message": "The model `gpt-x` does not exist"}}),
            ModelConfigError,
            "does not know model",
        ),
        (
            httpx2.Response(
                400,
                json={"error": {"code": "context_length_exceeded", "message": "too long"}},
            ),
            ContextLengthError,
            "too long",
        ),
        (
            httpx2.Response(
                400,
                json={
                    "error": {
                        "type": "exceed_context_size_error",
                        "message": "the request exceeds the available context size",
                    }
                },
            ),
            ContextLengthError,
            "too long",
        ),
        (httpx2.Response(400, json={"error": {"message": "bad temperature"}}), ModelError, "400"),
    ],
    ids=["401", "404", "openai-context", "llama-cpp-context", "400"],
)
async def test_errors_that_are_not_retried(response, error, words):
    server = Server(response)
    provider = openai(server, KEYED)
    with pytest.raises(error, match=words):
        await provider.complete(REQUEST)
    await provider.aclose()
    assert len(server.requests) == 1


ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": "sk-ant-test"}


def anthropic(server: Server, env: dict[str, str] = ANTHROPIC_ENV) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-test", env=env, transport=httpx2.MockTransport(server), sleep=Sleeps()
    )


async def test_anthropic_messages_api_request_and_reply():
    server = Server(
        httpx2.Response(
            200,
            json={
                "content": [
                    {"type": "text", "text": "Plan: run it"},
                    {"type": "tool_use", "id": "t2", "name": "execute", "input": {"code": "x=1"}},
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 300, "output_tokens": 20},
            },
        )
    )
    provider = anthropic(server)
    reply = await provider.complete(REQUEST)
    await provider.aclose()
    body = server.body()
    request = server.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert body["system"] == "be brief"
    assert [t["name"] for t in body["tools"]] == ["search", "execute"]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "execute",
        "input": {"code": "print(1)"},
    }
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert reply.text == "Plan: run it"
    assert reply.tool_calls == (ToolCallRequest("t2", "execute", {"code": "x=1"}),)
    assert (reply.tokens_in, reply.tokens_out) == (300, 20)


async def test_anthropic_needs_its_key():
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-test", env={})


async def test_anthropic_overloaded_is_retried_and_prompt_too_long_is_a_context_error():
    server = Server(
        httpx2.Response(529, json={"error": {"type": "overloaded_error", "message": "busy"}}),
        httpx2.Response(
            400,
            json={"error": {"type": "invalid_request_error", "message": "prompt is too long"}},
        ),
    )
    provider = anthropic(server)
    with pytest.raises(ContextLengthError):
        await provider.complete(REQUEST)
    await provider.aclose()
    assert len(server.requests) == 2


def test_make_provider_picks_by_prefix_and_rejects_unknown_ones(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert isinstance(make_provider("openai:gpt-4o-mini"), OpenAIProvider)
    with pytest.raises(ModelConfigError, match="unknown model provider 'gemini'"):
        make_provider("gemini:pro")
    with pytest.raises(ModelConfigError, match="not PROVIDER:NAME"):
        make_provider("gpt-4o")

"""POST a JSON request to a model API, with retries and errors that say what to do.

429 and 5xx (and 529, Anthropic's "overloaded") are retried with exponential backoff and
jitter, honouring ``Retry-After``; so are dropped connections and connect timeouts, but never a
read timeout (the server is still working on the request) nor past the call's time limit.
401/403 mean a bad key, 404 an unknown model or URL, a 400 about the context window is a
``ContextLengthError``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from codemode.errors import ContextLengthError, ModelConfigError, ModelError, ModelTimeoutError

__all__ = ["HttpSettings", "Sleep", "post_json"]

Sleep = Callable[[float], Awaitable[None]]
_RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "exceed_context_size",
    "exceeds the available context",
)
_MAX_WAIT_S = 60.0
# A retry is only worth starting with at least this long left before the call's deadline.
_MIN_ATTEMPT_S = 5.0


@dataclass(frozen=True, slots=True)
class HttpSettings:
    max_retries: int = 4
    backoff_s: float = 1.0
    # Who we are talking to, for messages: "OpenAI-compatible server at http://..."
    label: str = "the model API"
    model: str = ""
    key_hint: str = ""


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, min(float(value), _MAX_WAIT_S))
    except ValueError:
        return None


def _error_text(response: httpx2.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)[:500]
    if isinstance(error, str):
        return error[:500]
    return str(data)[:500]


def _raise_for(response: httpx2.Response, settings: HttpSettings) -> None:
    status = response.status_code
    message = _error_text(response)
    lowered = (message + " " + response.text[:2000]).lower()
    if status in (401, 403):
        raise ModelConfigError(
            f"{settings.label} refused the API key (HTTP {status}): {message}",
            fix=settings.key_hint or "check the API key",
        )
    if status == 404:
        raise ModelConfigError(
            f"{settings.label} does not know model {settings.model!r} or the URL "
            f"(HTTP 404): {message}",
            fix="check the model name after PROVIDER: and the base URL",
        )
    if any(word in lowered for word in _CONTEXT_WORDS):
        raise ContextLengthError(
            f"the conversation is too long for {settings.model or 'the model'}: {message}",
            fix="lower context_tokens for this model in [agent.models]",
        )
    if (
        status in (400, 422)
        and "model" in lowered
        and ("not found" in lowered or "does not exist" in lowered or "unknown" in lowered)
    ):
        raise ModelConfigError(
            f"{settings.label} does not know model {settings.model!r}: {message}",
            fix="check the model name after PROVIDER:",
        )
    raise ModelError(
        f"{settings.label} answered HTTP {status}: {message}",
        fix="see the message; retried errors (429, 5xx) already were",
    )


async def post_json(
    client: httpx2.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: dict[str, Any],
    settings: HttpSettings,
    sleep: Sleep,
    rng: random.Random | None = None,
    timeout_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """The decoded JSON answer; retries what is worth retrying, raises the rest. With
    ``timeout_s`` the whole call, retries and waits included, ends within it: a retry that
    could not finish in the time left is not started."""
    rng = rng or random.Random()  # jitter, not security
    deadline = None if timeout_s is None else clock() + timeout_s
    attempt = 0
    while True:
        wait: float | None = None
        failure: str
        extra: dict[str, Any] = {}
        if deadline is not None:
            extra["timeout"] = _attempt_timeout(client, deadline - clock())
        try:
            response = await client.post(url, headers=dict(headers), json=body, **extra)
        except httpx2.ReadTimeout:
            # The server took the request and is still on it: asking again only doubles its work.
            waited = extra["timeout"].read if extra else client.timeout.read
            raise ModelTimeoutError(
                f"{settings.label} did not answer within {waited or 0:.0f} s",
                fix="a small local model on a CPU can take minutes per reply: lower max_tokens "
                "or raise timeout_s for this model in [agent.models], or --run-timeout",
            ) from None
        except (httpx2.TimeoutException, httpx2.TransportError) as error:
            failure = f"{type(error).__name__}: {error}"
        else:
            if response.status_code < 300:
                try:
                    data = response.json()
                except ValueError:
                    raise ModelError(
                        f"{settings.label} answered with something that is not JSON: "
                        f"{response.text[:200]!r}",
                        fix="check the base URL: it should point at the API, e.g. .../v1",
                    ) from None
                if not isinstance(data, dict):
                    raise ModelError(f"{settings.label} answered with a JSON {type(data).__name__}")
                return data
            if response.status_code not in _RETRIED:
                _raise_for(response, settings)
            failure = f"HTTP {response.status_code}: {_error_text(response)}"
            wait = _retry_after(response)
        if attempt >= settings.max_retries:
            raise ModelError(
                f"{settings.label} failed {attempt + 1} times; last: {failure}",
                fix="try again later, or raise max_retries for this model in [agent.models]",
            )
        if wait is None:
            wait = min(settings.backoff_s * 2**attempt, _MAX_WAIT_S)
            wait *= 0.5 + rng.random()  # jitter: many clients do not retry in step
        if deadline is not None and clock() + wait + _MIN_ATTEMPT_S > deadline:
            raise ModelError(
                f"{settings.label} failed ({failure}) and no time is left for a retry "
                f"within this call's {timeout_s:.0f} s",
                fix="raise the run's time limit (--run-timeout) or use a faster model",
            )
        attempt += 1
        await sleep(wait)


def _attempt_timeout(client: httpx2.AsyncClient, left_s: float) -> httpx2.Timeout:
    """The client's own timeouts, none longer than the time left (at least 1 s)."""
    left_s = max(left_s, 1.0)
    own = client.timeout

    def bounded(value: float | None) -> float:
        return left_s if value is None else min(value, left_s)

    return httpx2.Timeout(
        connect=bounded(own.connect),
        read=bounded(own.read),
        write=bounded(own.write),
        pool=bounded(own.pool),
    )


def model_client(
    timeout_s: float, transport: httpx2.AsyncBaseTransport | None
) -> httpx2.AsyncClient:
    """The HTTP client of a model provider: ``timeout_s`` per request, at most 10 s to connect."""
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0)), transport=transport
    )

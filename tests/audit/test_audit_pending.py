"""A large argument's digest is worked out while the call runs, and is the same digest."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from codemode.audit import AuditInvoker, MemoryAuditLog, pending
from codemode.audit.events import argument_digest
from codemode.audit.pending import EARLY_CHARS, digest_during_call
from codemode.tools import ToolCall

KEY = b"k" * 32


def test_a_large_argument_is_digested_on_another_thread_while_the_call_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = threading.Event()
    threads: list[str] = []

    def watched(arguments: Any, *, key: bytes | None) -> str:
        threads.append(threading.current_thread().name)
        started.set()
        return argument_digest(arguments, key=key)

    monkeypatch.setattr(pending, "argument_digest", watched)
    big = {"text": "x" * EARLY_CHARS, "n": 1}

    class Waits:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            # The call cannot return before the digest has begun: it runs meanwhile.
            assert started.wait(10), "the digest did not start while the call ran"
            return "ok"

    log = MemoryAuditLog()
    invoker = AuditInvoker(Waits(), log, "s1", digest_key=KEY)
    assert invoker.invoke(ToolCall("up", "echo", big), timeout_s=5) == "ok"
    assert threads and threads[0].startswith("codemode-audit-digest")
    (event,) = log.query()
    assert event.args_digest == argument_digest(big, key=KEY)


def test_a_small_argument_is_digested_after_the_call_on_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: list[str] = []

    def watched(arguments: Any, *, key: bytes | None) -> str:
        threads.append(threading.current_thread().name)
        return argument_digest(arguments, key=key)

    monkeypatch.setattr(pending, "argument_digest", watched)
    digest = digest_during_call({"text": "short"}, key=None)
    assert threads == [], "nothing is worked out before it is asked for"
    assert digest() == argument_digest({"text": "short"})
    assert threads == [threading.current_thread().name]


def test_arguments_that_are_not_a_table_are_digested_as_before() -> None:
    assert digest_during_call(["x" * EARLY_CHARS], key=KEY)() == argument_digest(
        ["x" * EARLY_CHARS], key=KEY
    )

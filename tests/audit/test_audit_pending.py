"""A large argument's digest is worked out while the call waits for its server (not while the
guards still read the argument), and is the same digest."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from codemode.audit import AuditInvoker, MemoryAuditLog, pending
from codemode.audit.events import argument_digest
from codemode.audit.pending import EARLY_CHARS, digest_during_call
from codemode.bridge import waiting
from codemode.bridge.waiting import now_waiting
from codemode.errors import ToolError
from codemode.tools import ToolCall

KEY = b"k" * 32


def _watch(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[str]]:
    started = threading.Event()
    threads: list[str] = []

    def watched(arguments: Any, *, key: bytes | None) -> str:
        threads.append(threading.current_thread().name)
        started.set()
        return argument_digest(arguments, key=key)

    monkeypatch.setattr(pending, "argument_digest", watched)
    return started, threads


def test_a_large_argument_is_digested_on_another_thread_once_the_call_is_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, threads = _watch(monkeypatch)
    big = {"text": "x" * EARLY_CHARS, "n": 1}

    class Waits:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            # The guards read the argument first: the digest has not begun.
            time.sleep(0.05)
            assert not started.is_set(), "the digest started before the call went out"
            now_waiting()  # what the catalog's invoker does once the request is sent
            # The call cannot return before the digest has begun: it runs meanwhile.
            assert started.wait(10), "the digest did not start while the call waited"
            return "ok"

    log = MemoryAuditLog()
    invoker = AuditInvoker(Waits(), log, "s1", digest_key=KEY)
    assert invoker.invoke(ToolCall("up", "echo", big), timeout_s=5) == "ok"
    assert threads and threads[0].startswith("codemode-audit-digest")
    (event,) = log.query()
    assert event.args_digest == argument_digest(big, key=KEY)


def test_a_call_refused_before_it_went_out_is_digested_on_the_callers_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, threads = _watch(monkeypatch)
    big = {"text": "y" * EARLY_CHARS}

    class Refuses:
        def invoke(self, call: ToolCall, *, timeout_s: float) -> Any:
            raise ToolError("refused before it was sent")

    log = MemoryAuditLog()
    invoker = AuditInvoker(Refuses(), log, "s1", digest_key=KEY)
    with pytest.raises(ToolError):
        invoker.invoke(ToolCall("up", "echo", big), timeout_s=5)
    assert threads == [threading.current_thread().name]
    (event,) = log.query()
    assert event.args_digest == argument_digest(big, key=KEY)
    # Nothing of it is left for the next call on this thread to start.
    assert waiting._deferred() == []
    started.clear()
    now_waiting()
    assert not started.is_set()


def test_work_that_fails_to_start_does_not_fail_the_call() -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    waiting.defer_until_waiting(broken)
    waiting.defer_until_waiting(lambda: ran.append("next"))
    now_waiting()
    assert ran == ["next"] and waiting._deferred() == []


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


class _Blob:
    """Something the arguments hold that a weak reference can follow."""


@pytest.mark.parametrize("went_out", [True, False])
def test_the_digest_lets_go_of_the_arguments_once_asked_without_a_collection(
    went_out: bool,
) -> None:
    import gc
    import weakref

    blob = _Blob()
    watched = weakref.ref(blob)
    arguments: dict[str, Any] | None = {"text": "x" * EARLY_CHARS, "blob": blob}
    expected = argument_digest(arguments, key=KEY)
    del blob
    gc.disable()  # a reference cycle would keep the arguments until a collection
    try:
        digest = digest_during_call(arguments, key=KEY)
        if went_out:
            now_waiting()
        arguments = None
        assert digest() == expected
        del digest
        assert watched() is None, "the arguments outlived the digest (a reference cycle)"
    finally:
        gc.enable()

"""Joining a cluster: Ray Client's per-driver server failing to start is tried again; anything
else fails at once with the fix. (``ray.init`` is scripted here: the real joins are in
test_cluster_engine.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import ray

from codemode.cluster import provider
from codemode.errors import ClusterError
from codemode.settings.cluster import ClusterSettings

SERVER_DID_NOT_START = (
    "Initialization failure from server:\nRuntimeError: Starting Ray client server failed. "
    "See ray_client_server_23000.err for detailed logs."
)


class ScriptedInit:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls: list[dict[str, Any]] = []
        self.shutdowns = 0

    def init(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(failures: list[BaseException]) -> ScriptedInit:
        script = ScriptedInit(failures)
        monkeypatch.setattr(ray, "is_initialized", lambda: False)
        monkeypatch.setattr(ray, "init", script.init)
        monkeypatch.setattr(ray, "shutdown", script.shutdown)
        monkeypatch.setattr(provider.time, "sleep", lambda seconds: None)
        return script

    return install


def test_a_client_server_that_fails_to_start_is_tried_again(scripted: Any, caplog: Any) -> None:
    script = scripted([ConnectionError(SERVER_DID_NOT_START)] * 2)
    provider.connect(ClusterSettings(address="ray://head:10001"))
    assert len(script.calls) == 3 and script.shutdowns == 2
    assert script.calls[-1]["address"] == "ray://head:10001"
    assert sum("trying again" in r.getMessage() for r in caplog.records) == 2


def test_it_gives_up_after_three_tries_with_the_fix(scripted: Any) -> None:
    script = scripted([ConnectionError(SERVER_DID_NOT_START)] * 5)
    with pytest.raises(ClusterError, match="could not join the Ray cluster at ray://head:10001"):
        provider.connect(ClusterSettings(address="ray://head:10001"))
    assert len(script.calls) == 3


def test_other_failures_are_not_retried(scripted: Any) -> None:
    script = scripted([ConnectionError("Failed to connect: connection refused")])
    with pytest.raises(ClusterError) as raised:
        provider.connect(ClusterSettings(address="ray://head:10001"))
    assert len(script.calls) == 1
    assert "ray start --head" in (raised.value.fix or "")


def test_a_gcs_address_is_not_retried(scripted: Any) -> None:
    script = scripted([RuntimeError(SERVER_DID_NOT_START)])
    with pytest.raises(ClusterError):
        provider.connect(ClusterSettings(address="head:6379"))
    assert len(script.calls) == 1

"""A remote sandbox without Ray: a ``NodeAgent`` in this process (the worker side) and the
gateway-side runner over real TCP on 127.0.0.1, with real bubblewrap guests."""

from __future__ import annotations

from codemode.cluster.agent import NodeAgent
from codemode.cluster.remote import RemoteGuest, StreamLink
from codemode.sandbox.runner import Sandbox
from codemode.settings.sandbox import Limits, SandboxSettings

SETTINGS = SandboxSettings(limits=Limits(wall_time_s=10, memory_bytes=512 << 20), pool_size=0)


def connect(
    agent: NodeAgent, settings: SandboxSettings = SETTINGS, carry_from: str | None = None
) -> Sandbox:
    """Lease a guest from ``agent`` and serve it here, as the provider does."""
    endpoint = agent.lease(settings.model_dump(mode="json"), carry_from)
    assert endpoint is not None, "the agent has no free slot"
    link = StreamLink(endpoint["host"], endpoint["port"], bytes.fromhex(endpoint["token"]))
    sandbox = Sandbox(RemoteGuest(endpoint, settings.limits, link, "local"), settings.limits)
    sandbox.wait_ready(30)
    return sandbox

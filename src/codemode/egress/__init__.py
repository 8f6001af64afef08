"""The egress allowlist: a host-side HTTP proxy that lets sandboxed code reach listed hosts.

See ``docs/egress.md``. ``EgressHub`` serves one ``EgressGate`` (a Unix socket) per sandbox;
``NetworkSettings`` is the ``[sandbox.network]`` table.
"""

from codemode.egress.proxy import EgressGate, EgressHub
from codemode.egress.records import (
    ConnectionRecord,
    RecordSink,
    Resolver,
    StaticResolver,
    SystemResolver,
)
from codemode.egress.rules import EgressRules, Refusal
from codemode.settings.egress import NetworkSettings

__all__ = [
    "ConnectionRecord",
    "EgressGate",
    "EgressHub",
    "EgressRules",
    "NetworkSettings",
    "RecordSink",
    "Refusal",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
]

"""Sandboxes on other machines: a Ray-backed ``SandboxProvider`` and the stream it relays over.

``codemode.cluster.agent`` and ``codemode.cluster.host`` run on worker nodes;
``codemode.cluster.remote`` and ``codemode.cluster.provider`` on the gateway.
"""

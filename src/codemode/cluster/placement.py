"""Where a new sandbox goes: the least loaded node that has a free slot, or "busy"."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NodeLoad", "choose_node"]


@dataclass(frozen=True)
class NodeLoad:
    node_id: str
    address: str  # the node's IP: the sandbox's stream listens there
    slots: int  # sandboxes the node offers
    used: int  # sandboxes this gateway has placed there and not yet closed

    @property
    def free(self) -> int:
        return self.slots - self.used

    @property
    def load(self) -> float:
        return self.used / self.slots if self.slots else 1.0


def choose_node(nodes: list[NodeLoad]) -> NodeLoad | None:
    """The node with the lowest share of its slots in use; None when every node is full."""
    open_nodes = [node for node in nodes if node.free > 0]
    if not open_nodes:
        return None
    return min(open_nodes, key=lambda node: (node.load, -node.free, node.node_id))

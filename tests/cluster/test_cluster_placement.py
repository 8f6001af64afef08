"""Placement: the least loaded node with a free slot, or none (the caller answers "busy")."""

from __future__ import annotations

from codemode.cluster.placement import NodeLoad, choose_node
from codemode.config import CodemodeConfig
from codemode.errors import ClusterBusyError
from codemode.settings.cluster import ClusterSettings


def node(name: str, slots: int, used: int) -> NodeLoad:
    return NodeLoad(name, "10.0.0.1", slots, used)


def test_the_node_with_the_lowest_share_in_use_wins():
    chosen = choose_node([node("a", 4, 2), node("b", 8, 2), node("c", 2, 1)])
    assert chosen is not None and chosen.node_id == "b"


def test_on_a_tie_the_node_with_more_free_slots_wins():
    chosen = choose_node([node("a", 2, 1), node("b", 8, 4)])
    assert chosen is not None and chosen.node_id == "b"


def test_full_nodes_are_skipped_and_a_full_cluster_has_no_choice():
    assert choose_node([node("a", 2, 2), node("b", 1, 0)]) == node("b", 1, 0)
    assert choose_node([node("a", 2, 2), node("b", 1, 1)]) is None
    assert choose_node([]) is None


def test_busy_says_when_to_retry_and_how_to_fix_it():
    error = ClusterBusyError(5)
    assert error.code == "busy"
    assert str(error).startswith("busy, retry after 5 s")
    assert "add worker nodes" in str(error)


def test_the_cluster_section_is_part_of_the_config():
    config = CodemodeConfig.model_validate(
        {"cluster": {"address": "ray://head:10001", "busy_retry_after_s": 2}}
    )
    assert config.cluster == ClusterSettings(address="ray://head:10001", busy_retry_after_s=2)
    assert CodemodeConfig().cluster.address is None  # local sandboxes unless configured


def test_serve_takes_a_cluster_address():
    from codemode.cli.main import build_parser
    from codemode.cli.serve_command import with_cluster

    args = build_parser().parse_args(["serve", "--cluster", "ray://head:10001"])
    assert args.cluster == "ray://head:10001"
    config = with_cluster(CodemodeConfig(), args.cluster)
    assert config.cluster.address == "ray://head:10001"
    assert build_parser().parse_args(["serve"]).cluster is None


def test_a_lost_session_is_a_failure_of_codemode_not_of_the_code():
    from codemode.cli.exit_codes import ExitCode, for_status

    assert for_status("session_lost", None) == ExitCode.FAILURE == 70

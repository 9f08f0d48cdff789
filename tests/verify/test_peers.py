"""verify/peers.py: nodes and ranks side by side."""

from __future__ import annotations

import torchfit.verify.peers as vpeers


def test_nodes_that_disagree_are_flagged() -> None:
    base = {
        "hostname": "a",
        "nvrm": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "cudnn": 91900,
        "nccl_code": 22809,
        "nccl_path": "/n/libnccl.so.2",
    }
    peers = [
        dict(base, rank=0, group_rank=0, node_rank=0),
        dict(base, rank=1, group_rank=0, node_rank=0),
        dict(
            base,
            rank=2,
            group_rank=1,
            node_rank=1,
            hostname="b",
            nccl_code=22803,
            nccl_path="/usr/lib/libnccl.so.2",
        ),
    ]
    nodes, node_diffs, rank_diffs = vpeers.compare_peers(peers)
    assert [n["ranks"] for n in nodes] == [[0, 1], [2]] and nodes[0]["driver"] == "580.159.04"
    assert node_diffs == ["nccl: node 0 (a) 2.28.9, node 1 (b) 2.28.3"] and rank_diffs == []


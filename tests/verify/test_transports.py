"""NCCL's INFO lines -> the transports each connection used, and the judgement of a
multi-node run that fell back to sockets (verify/transports.py). The lines are in the
form NCCL prints them (quoted in NVIDIA/nccl issues and vLLM's troubleshooting docs);
this session's lent machine has one GPU, so no channel line was captured here."""

from __future__ import annotations

from torchfit.verify.transports import classify, debug_env, judge_transports, parse_nccl_info

ONE_NODE = """\
h200:801:815 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
h200:802:816 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
h200:801:815 [0] NCCL INFO Connected all rings
"""
TWO_NODES_SOCKET = """\
node01:2771:2801 [0] NCCL INFO NET/IB : No device found.
node01:2771:2801 [0] NCCL INFO Using network Socket
node01:2771:2801 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
node01:2771:2801 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
tesla-105:1477:2150 [1] NCCL INFO Channel 00 : 1[1a000] -> 2[af000] via direct shared memory
"""
TWO_NODES_IB = """\
gpu07:99:120 [0] NCCL INFO Using network IB
gpu07:99:120 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
gpu07:99:120 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
"""


def test_lines_become_transport_counts() -> None:
    assert parse_nccl_info(ONE_NODE.splitlines()) == {"P2P": 2}
    assert parse_nccl_info(TWO_NODES_SOCKET.splitlines()) == {"network:Socket": 1, "NET/Socket": 2, "SHM": 1}
    assert parse_nccl_info(TWO_NODES_IB.splitlines()) == {"network:IB": 1, "NET/IB": 2}
    assert classify("SHM/direct/direct") == "SHM" and classify("NET/AWS Libfabric/0") == "NET/AWS Libfabric"


def test_sockets_across_nodes_with_infiniband_present_fail() -> None:
    counts = parse_nccl_info(TWO_NODES_SOCKET.splitlines())
    bad = judge_transports(counts, multi_node=True, ib=["mlx5_0", "mlx5_1"])
    assert bad.status == "fail" and "fell back to TCP sockets" in bad.summary and "mlx5_0" in bad.summary
    assert bad.hint and "NCCL_IB_HCA" in bad.hint
    # No IB on the node: sockets are all it has (a report, not a failure); one node: no network hop.
    assert judge_transports(counts, multi_node=True, ib=[]).status == "pass"
    assert judge_transports(parse_nccl_info(ONE_NODE.splitlines()), multi_node=False, ib=["mlx5_0"]).status == "pass"
    ib = judge_transports(parse_nccl_info(TWO_NODES_IB.splitlines()), multi_node=True, ib=["mlx5_0"])
    assert ib.status == "pass" and ib.summary == "NCCL connections: NET/IB x2; network IB"
    assert judge_transports({}, multi_node=True, ib=["mlx5_0"]).status == "skip"


def test_a_users_own_nccl_debug_is_kept() -> None:
    assert debug_env({"NCCL_DEBUG": "WARN"}, "/w") == {"NCCL_DEBUG": "WARN"}
    assert debug_env({}, "/w") == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/w/nccl-%h-%p.log"}


def test_a_real_one_rank_nccl_log_names_its_network_and_no_connection() -> None:
    # tests/data/verify/README.md: NCCL 2.28.9's debug file of a one-rank verify on the H200.
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "data" / "verify" / "nccl-info-h200-1rank.log").read_text()
    counts = parse_nccl_info(text.splitlines())
    assert counts == {"network:Socket": 1}
    check = judge_transports(counts, multi_node=False, ib=[])
    assert check.status == "skip" and check.summary.endswith("NCCL chose network Socket")

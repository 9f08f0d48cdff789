"""Several ranks and nodes: one row per node of what each runs (driver, torch,
CUDA, cuDNN, NCCL), and where nodes or the ranks of one node disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchfit.host.nvidia import parse_module_version, parse_nvrm_version
from torchfit.verify.inspection import code_text

if TYPE_CHECKING:
    from torchfit.workers.records import PeerRecord, SummaryRecord


def parse_driver(info: SummaryRecord) -> str | None:
    """The driver version a rank saw (/proc/driver/nvidia/version or the module's)."""
    if info.get("nvrm"):
        found = parse_nvrm_version(str(info["nvrm"]))
        if found:
            return found
    if info.get("nvidia_module"):
        return parse_module_version(str(info["nvidia_module"]))
    return None


COMPARED = ("driver", "torch", "cuda", "cudnn", "nccl")
# The environment that must agree across nodes (issue 19): a node whose ranks see another
# GPU count, another NCCL interface or HCA, or another import or library path runs
# another program. CUDA_VISIBLE_DEVICES is compared by how many GPUs it names.
ENV_COMPARED = ("CUDA_VISIBLE_DEVICES count", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "PYTHONPATH",
                "LD_LIBRARY_PATH", "LD_PRELOAD")


def env_row(env: Mapping[str, str]) -> dict[str, str]:
    """The compared environment of one rank, each value as shown ("unset" when absent)."""
    out = {}
    for key in ENV_COMPARED:
        if key == "CUDA_VISIBLE_DEVICES count":
            cvd = env.get("CUDA_VISIBLE_DEVICES")
            out[key] = "unset (all)" if cvd is None else str(len([e for e in str(cvd).split(",") if e.strip()]))
        else:
            value = env.get(key)
            out[key] = "unset" if value is None else repr(str(value))
    return out


def peer_row(info: PeerRecord) -> dict[str, Any]:
    cudnn = info.get("cudnn")
    label = info.get("node_rank")
    return {
        "group": info.get("group_rank", 0),
        "node": label if label is not None else info.get("group_rank", 0),
        "rank": info.get("rank"),
        # Under Slurm the node's name (slurmd's SLURMD_NODENAME), which is what sinfo and the
        # admin call it; several slurmds can share one host name.
        "host": (info.get("env") or {}).get("SLURMD_NODENAME") or info.get("hostname"),
        "driver": parse_driver(info) or "none",
        "torch": info.get("torch") or "none",
        "cuda": info.get("cuda") or (f"hip {info['hip']}" if info.get("hip") else "none"),
        "cudnn": code_text(cudnn) if isinstance(cudnn, int) else "none",
        "nccl": code_text(info.get("nccl_code")) or "none",
        "nccl_path": info.get("nccl_path"),
        "env": info.get("env") or {},
        **env_row(info.get("env") or {}),
    }


def compare_peers(
    peers: Sequence[PeerRecord],
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Per-node rows (ranks of a node merged), node disagreements, rank disagreements."""
    rows = [peer_row(p) for p in peers if isinstance(p, Mapping)]
    by_group: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(int(row["group"] or 0), []).append(row)
    nodes = []
    rank_diffs = []
    for _group, members in sorted(by_group.items(), key=lambda kv: (kv[1][0]["node"], kv[0])):
        node = members[0]["node"]
        merged: dict[str, Any] = {
            "node": node,
            "host": members[0]["host"],
            "ranks": sorted(m["rank"] for m in members),
        }
        for key in (*COMPARED, "nccl_path"):
            values = sorted({str(m[key]) for m in members})
            merged[key] = values[0] if len(values) == 1 else "mixed: " + " / ".join(values)
            if len(values) > 1:
                rank_diffs.append(
                    f"node {node}: ranks disagree on {key}: "
                    + ", ".join(f"rank {m['rank']} {m[key]}" for m in members)
                )
        merged.update({key: members[0][key] for key in ENV_COMPARED})
        nodes.append(merged)
    node_diffs = []
    if len(nodes) > 1:
        for key in (*COMPARED, *ENV_COMPARED):
            distinct = {n[key] for n in nodes}
            if len(distinct) > 1:
                node_diffs.append(
                    f"{key}: "
                    + ", ".join(f"node {n['node']} ({n['host']}) {n[key]}" for n in nodes)
                )
    if len(nodes) == 1 and not rank_diffs:
        paths = {str(r["nccl_path"]) for r in rows}
        if len(paths) > 1:
            rank_diffs.append("ranks load NCCL from different files: " + ", ".join(sorted(paths)))
    return nodes, node_diffs, rank_diffs

"""Which NCCL transport each connection used, read from NCCL's own INFO lines, and the
judgement of a multi-node run that fell back to sockets (issue 19; NVIDIA/nccl#451, #941).

verify runs NCCL ranks with `NCCL_DEBUG=INFO` and `NCCL_DEBUG_FILE=WORK/nccl-%h-%p.log`
(unless the user set NCCL_DEBUG), so the lines stay out of the rank logs. NCCL writes one
line per connection when it sets a channel up, in this form (NCCL's INFO output, as quoted
across NVIDIA/nccl issues and vLLM's "Troubleshooting distributed" docs):

    host:pid:tid [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    host:pid:tid [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
    host:pid:tid [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0
    host:pid:tid [1] NCCL INFO Channel 00 : 1[1a000] -> 2[af000] via direct shared memory
    host:pid:tid [0] NCCL INFO Using network Socket

A multi-node run whose connections between nodes went over NET/Socket while the node has
InfiniBand devices (/sys/class/infiniband) fails: the fabric is there and unused.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Mapping

from torchfit.checks import Check, Status

_VIA = re.compile(r"NCCL INFO Channel [0-9/]+ : \S+ -> \S+ (?:\[(send|receive)\] )?via (\S.*?)\s*$")
_NETWORK = re.compile(r"NCCL INFO Using network (\S.*?)\s*$")


def classify(via: str) -> str:
    """'P2P/CUMEM/read' -> 'P2P', 'SHM/direct/direct' or 'direct shared memory' -> 'SHM',
    'NET/IB/0/GDRDMA' -> 'NET/IB', 'NET/Socket/0' -> 'NET/Socket', 'NET/AWS Libfabric/0' -> 'NET/AWS Libfabric'."""
    if via.startswith("P2P"):
        return "P2P"
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    if via.startswith("NET/"):
        parts = via.split("/")
        return f"NET/{parts[1]}" if len(parts) > 1 else "NET"
    if via.startswith("CollNet") or via.startswith("COLLNET"):
        return "CollNet"
    return via.split("/")[0]


def parse_nccl_info(lines: Iterable[str]) -> dict[str, int]:
    """{transport: connections} from NCCL INFO lines; "network" entries name the network
    NCCL chose ("network:Socket")."""
    out: dict[str, int] = {}
    for line in lines:
        m = _VIA.search(line)
        if m:
            kind = classify(m.group(2))
            out[kind] = out.get(kind, 0) + 1
            continue
        m = _NETWORK.search(line)
        if m:
            key = f"network:{m.group(1)}"
            out[key] = out.get(key, 0) + 1
    return out


def read_nccl_logs(work: str, results: str) -> dict[str, int]:
    """The transports in NCCL's debug files under `work` and in the rank logs."""
    counts: dict[str, int] = {}
    for path in glob.glob(os.path.join(work, "nccl-*.log")) + glob.glob(os.path.join(results, "rank-*.log")):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                found = parse_nccl_info(fh)
        except OSError:
            continue
        for k, v in found.items():
            counts[k] = counts.get(k, 0) + v
    return counts


def infiniband_devices(root: str = "/") -> list[str]:
    try:
        return sorted(os.listdir(os.path.join(root, "sys/class/infiniband")))
    except OSError:
        return []


def debug_env(env: Mapping[str, str], work: str) -> dict[str, str]:
    """The ranks' environment with NCCL's INFO lines on, into WORK/nccl-%h-%p.log (NCCL
    expands %h and %p); a user's own NCCL_DEBUG is left as it is."""
    out = dict(env)
    if "NCCL_DEBUG" not in out:
        out["NCCL_DEBUG"] = "INFO"
        out.setdefault("NCCL_DEBUG_FILE", os.path.join(work, "nccl-%h-%p.log"))
    return out


def judge_transports(counts: Mapping[str, int], multi_node: bool, ib: list[str]) -> Check:
    """The transports NCCL used; a multi-node run over sockets on a node with IB fails."""
    links = {k: v for k, v in counts.items() if not k.startswith("network:")}
    networks = sorted(k.split(":", 1)[1] for k in counts if k.startswith("network:"))
    if not links:
        why = "no NCCL connection lines (one rank, or NCCL_DEBUG set to less than INFO)"
        return Check("transports", Status.SKIP, why + (f"; NCCL chose network {', '.join(networks)}" if networks else ""))
    shown = ", ".join(f"{k} x{v}" for k, v in sorted(links.items()))
    summary = f"NCCL connections: {shown}" + (f"; network {', '.join(networks)}" if networks else "")
    if multi_node and "NET/Socket" in links and ib:
        return Check(
            "transports",
            Status.FAIL,
            f"{summary}: between nodes NCCL fell back to TCP sockets while this node has InfiniBand "
            f"devices ({', '.join(ib)})",
            hint="check NCCL_IB_DISABLE and NCCL_IB_HCA, that the container sees /dev/infiniband and has "
                 "rdma-core (libibverbs), and `ibv_devinfo`; then run verify again (NVIDIA/nccl#451)",
        )
    return Check("transports", Status.PASS, summary)

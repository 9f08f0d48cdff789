"""The links between this host's GPUs, for judging all-reduce bandwidth: the
topology matrix (`nvidia-smi topo -m`), the NVLink rate of each link (`nvlink -s`),
each GPU's PCIe generation and width, and nvidia-smi's UUID -> index map.

Parsers are pure and never raise; `probe_links` runs the tools through the Runner
and keeps whatever it could read.
"""

from __future__ import annotations

import re
from typing import TypedDict

from torchfit.host._io import DEFAULT_TIMEOUT, _run_tool
from torchfit.host.nvidia import _query_argv, parse_query_gpu, probe_topology
from torchfit.runner import Runner


def parse_nvlink_status(text: str) -> dict[int, list[float]]:
    """`nvidia-smi nvlink -s` -> {gpu index: [GB/s of each active link]}.

    tests/data/h200-x2/nvlink-s.txt: "GPU 0: NVIDIA H200 (UUID: ...)" then lines
    "\t Link 0: 26.562 GB/s"; an inactive link reads "Link 3: <inactive>".
    Never raises; {} for anything else.
    """
    out: dict[int, list[float]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        m = re.match(r"^GPU\s+([0-9]+):", line.strip())
        if m:
            gpu = int(m.group(1))
            out.setdefault(gpu, [])
            continue
        m = re.match(r"^Link\s+[0-9]+:\s*([0-9]+(?:\.[0-9]+)?)\s*GB/s", line.strip())
        if m and gpu is not None:
            out[gpu].append(float(m.group(1)))
    return {g: rates for g, rates in out.items() if rates}


def parse_pcie_query(text: str) -> dict[int, tuple[int, int]]:
    """`nvidia-smi --query-gpu=index,pcie.link.gen.max,pcie.link.width.max
    --format=csv,noheader,nounits` -> {index: (gen, width)}. The max values: the
    current ones drop while a GPU idles."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 3 and all(c.isdigit() for c in cells[:3]):
            out[int(cells[0])] = (int(cells[1]), int(cells[2]))
    return out


class Links(TypedDict, total=False):
    """What `probe_links` read: what verify's bandwidth judgement holds a sweep to."""

    topology: dict[str, str]  # {"0-1": "NV18"}: nvidia-smi topo -m
    nvlink: dict[int, list[float]]  # GPU index -> GB/s of each active link
    pcie: dict[int, tuple[int, int]]  # GPU index -> (gen, width), the maxima
    uuids: dict[str, int]  # "GPU-..." -> index
    reason: str | None  # why the topology is unknown


def probe_links(timeout: float = DEFAULT_TIMEOUT) -> Links:
    """Topology, NVLink rates, PCIe links and UUIDs from nvidia-smi (through the Runner).

    Keys: topology {"0-1": "NV18"}, nvlink {index: [GB/s]}, pcie {index: (gen, width)},
    uuids {"GPU-...": index}, reason (why the topology is unknown, or None).
    """
    runner = Runner()
    out: Links = {"topology": {}, "nvlink": {}, "pcie": {}, "uuids": {}, "reason": None}
    if runner.which("nvidia-smi") is None:
        out["reason"] = "nvidia-smi not found"
        return out
    out["topology"], out["reason"] = probe_topology(runner, timeout=timeout)
    res, cause = _run_tool(runner, ["nvidia-smi", "nvlink", "-s"], timeout)
    if res is not None and cause is None:
        out["nvlink"] = parse_nvlink_status(res.stdout)
    res, cause = _run_tool(
        runner, _query_argv(("index", "pcie.link.gen.max", "pcie.link.width.max")), timeout
    )
    if res is not None and cause is None:
        out["pcie"] = parse_pcie_query(res.stdout)
    res, cause = _run_tool(runner, _query_argv(("index", "uuid")), timeout)
    if res is not None and cause is None:
        out["uuids"] = {
            g.uuid: g.index for g in parse_query_gpu(res.stdout, ("index", "uuid")).gpus if g.uuid
        }
    return out

"""The all-reduce bandwidth sweep, judged against what the links promise.

The promise comes from the topology (`nvidia-smi topo -m`), the NVLink rates and
the PCIe links that host.links probes; below WARN_FRACTION of it is a warning
that names the likely causes found in the ranks' environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchfit.checks import Check, Status
from torchfit.compat.ncclenv import is_nccl_switch_on
from torchfit.text import format_bytes_iec
from torchfit.verify.inspection import cvd_entries
from torchfit.verify.sizes import MIB

if TYPE_CHECKING:
    from torchfit.host.links import Links

# Below this fraction of what the links promise, bandwidth is a warning. Measured
# on 2x H200 NV18 (docs/architecture.md, Contracts): healthy 1 GiB busbw 322-332 GB/s of a 478 GB/s
# promise (0.67-0.69); NCCL_P2P_DISABLE=1 gives 27 GB/s (0.06).
WARN_FRACTION = 0.4
# The promise is a large-message figure; smaller sweeps measure per-call overhead
# (1 MiB: 22 GB/s on the same machine).
MIN_JUDGED_BYTES = 256 * MIB

# PCIe usable bandwidth per lane per direction, GB/s, after line encoding:
# gen1/2 8b/10b, gen3-5 128b/130b, gen6 FLIT (PCI-SIG base specifications).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def link_promise(
    pair: tuple[int, int],
    topology: Mapping[str, str],
    nvlink: Mapping[int, Sequence[float]],
    pcie: Mapping[int, tuple[int, int]],
) -> tuple[float | None, str]:
    """GB/s per direction that the link between two GPUs promises, and why."""
    i, j = sorted(pair)
    link = topology.get(f"{i}-{j}")
    m = re.fullmatch(r"NV([0-9]+)", link or "")
    if m:
        count = int(m.group(1))
        rates = [r for g in (i, j) for r in nvlink.get(g, ())]
        if not rates:
            return None, f"{link} (per-link rate unknown: nvidia-smi nvlink -s gave nothing)"
        rate = min(rates)
        return count * rate, f"{link} x {rate:g} GB/s per link"
    if link is None:
        return None, f"GPU{i}-GPU{j}: link unknown (nvidia-smi topo -m gave nothing)"
    gens = [pcie.get(g) for g in (i, j)]
    if any(g is None or g[0] not in PCIE_LANE_GBPS for g in gens):
        return None, f"{link} (PCIe link unknown)"
    bw = min(PCIE_LANE_GBPS[g[0]] * g[1] for g in gens if g)
    gen, width = min((g for g in gens if g), key=lambda g: PCIE_LANE_GBPS[g[0]] * g[1])
    return bw, f"{link}: PCIe gen{gen} x{width}"


def bandwidth_causes(
    env: Mapping[str, str], topology: Mapping[str, str], pairs: Sequence[tuple[int, int]]
) -> list[str]:
    """Likely reasons for low all-reduce bandwidth, from what the ranks saw."""
    causes = []
    if is_nccl_switch_on("NCCL_P2P_DISABLE", env.get("NCCL_P2P_DISABLE")):
        causes.append(
            "NCCL_P2P_DISABLE={} is set: NCCL copies through host memory instead of NVLink/PCIe P2P".format(
                env["NCCL_P2P_DISABLE"]
            )
        )
    if is_nccl_switch_on("NCCL_SHM_DISABLE", env.get("NCCL_SHM_DISABLE")):
        causes.append(
            "NCCL_SHM_DISABLE={} is set: with P2P off too, traffic goes through the network stack".format(
                env["NCCL_SHM_DISABLE"]
            )
        )
    if env.get("NCCL_P2P_LEVEL", "").strip().upper() in ("LOC", "0"):
        causes.append("NCCL_P2P_LEVEL={} disables P2P between GPUs".format(env["NCCL_P2P_LEVEL"]))
    for name in (
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_BUFFSIZE",
    ):
        if env.get(name):
            causes.append(f"{name}={env[name]} overrides NCCL's tuning")
    for i, j in pairs:
        link = topology.get(f"{min(i, j)}-{max(i, j)}")
        if link in ("SYS", "PHB", "NODE"):
            causes.append(
                f"GPU{i}-GPU{j} are linked through {link}: no NVLink, and P2P over that path is often unavailable or slow"
            )
    return causes


def judge_bandwidth(
    rows: Sequence[Mapping[str, Any]],
    promise: float | None,
    promise_source: str,
    causes: Sequence[str],
) -> Check:
    """Peak busbw against the promise: below WARN_FRACTION warns and names causes."""
    if not rows:
        return Check("bandwidth", Status.SKIP, "no sweep ran")
    if all(r["busbw"] == 0 for r in rows):
        # busbw = algbw * 2(n-1)/n is 0 for one rank: nothing crossed a link.
        return Check(
            "bandwidth", Status.SKIP, "one rank: an all-reduce crosses no link, nothing to measure"
        )
    peak = max(rows, key=lambda r: r["busbw"])
    largest = max(rows, key=lambda r: r["bytes"])
    text = f"peak busbw {peak['busbw']:.1f} GB/s at {format_bytes_iec(peak['bytes'])}"
    if promise is None:
        return Check("bandwidth", Status.PASS, f"{text}; no promise to compare ({promise_source})")
    if largest["bytes"] < MIN_JUDGED_BYTES:
        return Check(
            "bandwidth",
            Status.PASS,
            f"{text}; sizes below {format_bytes_iec(MIN_JUDGED_BYTES)} measure call overhead, not the "
            f"{promise:.0f} GB/s link ({promise_source}): not judged",
        )
    fraction = peak["busbw"] / promise
    text += f" = {fraction:.0%} of the {promise:.0f} GB/s the links promise ({promise_source})"
    if fraction >= WARN_FRACTION:
        return Check("bandwidth", Status.PASS, text)
    why = list(causes) or [
        "no known cause in the environment: run with NCCL_DEBUG=INFO and look for 'via P2P' "
        "(good) or 'via SHM'/'via NET' in the transport lines, and compare with nccl-tests all_reduce_perf"
    ]
    return Check(
        "bandwidth",
        Status.WARN,
        f"{text}: below {WARN_FRACTION:.0%}",
        tuple(f"likely cause: {c}" for c in why),
        hint="unset the variables above, or check the GPUs' P2P status with nvidia-smi topo -p2p r",
    )


def smi_indices(
    gpus: Sequence[Mapping[str, Any]], uuids: Mapping[str, int], cvd: str | None
) -> list[int]:
    """nvidia-smi indices of the GPUs torch sees (CUDA_VISIBLE_DEVICES renumbers them)."""
    out = []
    for g in gpus:
        u = str(g.get("uuid") or "")
        hit = next(
            (idx for full, idx in uuids.items() if u and full.lower().endswith(u.lower())), None
        )
        if hit is None:
            entries = cvd_entries(cvd)
            i = int(g.get("index", 0))
            if entries and i < len(entries) and entries[i].isdigit():
                hit = int(entries[i])
            else:
                hit = i
        out.append(hit)
    return out


def bandwidth_report(
    rows: Sequence[Mapping[str, Any]],
    links: Links | None,
    used: Sequence[int],
    env: Mapping[str, str],
    multi: bool,
    backend: str,
) -> tuple[dict[str, Any], Check]:
    promise: float | None = None
    source = (
        "gloo on CPU processes"
        if backend != "nccl"
        else "several nodes: the network decides"
        if multi
        else "topology unknown"
    )
    pairs = [(a, b) for k, a in enumerate(used) for b in used[k + 1 :]]
    if backend == "nccl" and not multi and links and pairs:
        values = [
            link_promise(
                p, links.get("topology") or {}, links.get("nvlink") or {}, links.get("pcie") or {}
            )
            for p in pairs
        ]
        known = [v for v in values if v[0] is not None]
        if known and len(known) == len(values):
            promise, source = min(known, key=lambda v: v[0] or 0.0)
            source += (
                " (nvidia-smi topo -m, nvlink -s)"
                if "NV" in source
                else " (nvidia-smi topo -m, --query-gpu pcie)"
            )
        else:
            source = next(v[1] for v in values if v[0] is None)
            if links.get("reason"):
                source += f"; {links['reason']}"
    causes = bandwidth_causes(env, (links or {}).get("topology") or {}, pairs) if promise else []
    check = judge_bandwidth(rows, promise, source, causes)
    data = {
        "rows": list(rows),
        "promise_gbps": round(promise, 1) if promise else None,
        "promise_source": source,
        "gpus": list(used),
        "warn_below_fraction": WARN_FRACTION,
        "peak_busbw": max((r["busbw"] for r in rows), default=None),
        "fraction": round(max(r["busbw"] for r in rows) / promise, 3) if promise and rows else None,
    }
    return data, check

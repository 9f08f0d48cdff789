"""GPU topology: NVLink that P2P cannot use, GPU pairs across CPU sockets, and WSL.

Links come from `nvidia-smi topo -m` (NV#, PIX, PXB, PHB, NODE, SYS) and peer
access from `nvidia-smi topo -p2p r` (OK, CNS, GNS, TNS, NS, DR, U: its legend).
WSL2 has no NVLink or P2P and its own libcuda under /usr/lib/wsl/lib (NVIDIA's
"CUDA on WSL" user guide).
"""

from __future__ import annotations

import os

from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn

P2P_LEGEND = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}


@check("nvlink-no-p2p", "topology", "GPUs joined by NVLink can use peer-to-peer access")
def check_nvlink_p2p(ctx: Context) -> Verdict:
    if len(ctx.gpus) < 2:
        return ok(f"{len(ctx.gpus)} GPU(s): no GPU pair to check")
    links, why = ctx.topology
    if not links:
        return unknown(f"cannot read the GPU links: {why}")
    nvlinked = {pair: kind for pair, kind in links.items() if kind.upper().startswith("NV")}
    cells, why = ctx.p2p
    if not cells:
        return unknown(f"cannot read peer-to-peer status: {why}")
    broken = [f"GPU{p.replace('-', '/GPU')} {nvlinked[p]} but P2P {c} ({P2P_LEGEND.get(c, c)})"
              for p, c in sorted(cells.items()) if p in nvlinked and c.upper() != "OK"]
    if broken:
        return fail(
            "; ".join(broken[:4]) + ": NCCL falls back to shared memory through the CPU (an order of "
            "magnitude slower; measured 350 -> 27 GB/s on 2x H200)",
            "on NVSwitch systems start nvidia-fabricmanager (`systemctl status nvidia-fabricmanager`, versions "
            "must match the driver); in a VM, the hypervisor must pass the NVLink/NVSwitch through; "
            "check `nvidia-smi nvlink -s` for inactive links",
        )
    no_p2p = [p for p, c in cells.items() if c.upper() != "OK"]
    if nvlinked:
        return ok(f"{len(nvlinked)} NVLink pair(s) ({', '.join(sorted(set(nvlinked.values())))}), P2P OK on all")
    if no_p2p:
        return ok(f"no NVLink; PCIe P2P is not available on {len(no_p2p)} pair(s) "
                  f"({', '.join(sorted({cells[p] for p in no_p2p}))}), normal for consumer GPUs")
    return ok("no NVLink; PCIe P2P OK on every pair")


@check("gpu-pairs-cross-socket", "topology", "GPU pairs do not cross CPU sockets (SYS)")
def check_cross_socket(ctx: Context) -> Verdict:
    if len(ctx.gpus) < 2:
        return ok(f"{len(ctx.gpus)} GPU(s): no GPU pair to check")
    links, why = ctx.topology
    if not links:
        return unknown(f"cannot read the GPU links: {why}")
    sys_pairs = sorted(p for p, kind in links.items() if kind.upper() == "SYS")
    if not sys_pairs:
        return ok(f"no pair crosses sockets ({', '.join(f'{p}: {k}' for p, k in sorted(links.items())[:6])})")
    shown = ", ".join(f"GPU{p.replace('-', '/GPU')}" for p in sys_pairs[:8])
    more = f" and {len(sys_pairs) - 8} more" if len(sys_pairs) > 8 else ""
    return warn(
        f"{len(sys_pairs)} of {len(links)} GPU pair(s) connect through the CPU interconnect (SYS): {shown}{more}; "
        "traffic between them crosses QPI/UPI/Infinity Fabric, P2P is often unavailable",
        "for jobs that use fewer GPUs, pick GPUs on one socket (`nvidia-smi topo -m` CPU/NUMA affinity) and "
        "bind processes to that NUMA node (`numactl --cpunodebind`, torchrun's `--numa-binding`)",
    )


@check("wsl", "topology", "under WSL, CUDA uses WSL's libcuda and /dev/dxg")
def check_wsl(ctx: Context) -> Verdict:
    is_wsl, why = ctx.wsl
    if is_wsl is None:
        return unknown(f"cannot tell whether this is WSL: {why}")
    if not is_wsl:
        return ok("not WSL")
    notes = ["WSL2 has no NVLink or GPU peer-to-peer; NCCL uses shared memory"]
    ld_entries, ld = ctx.ldconfig
    warning = "is not a symbolic link"
    texts = [ld.stderr, ctx.log_text or ""]
    if any(warning in t and "/usr/lib/wsl/lib" in t for t in texts):
        notes.append("the \"ldconfig: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link\" warning is harmless: "
                     "WSL mounts those files as copies (microsoft/WSL#11229)")
    wsl_cuda = ctx.path("/usr/lib/wsl/lib/libcuda.so.1")
    problems = []
    if not os.path.exists(wsl_cuda):
        problems.append("/usr/lib/wsl/lib/libcuda.so.1 is missing (the Windows NVIDIA driver provides it)")
    if not os.path.exists(ctx.path("/dev/dxg")):
        problems.append("/dev/dxg is missing (no GPU paravirtualization: WSL1, or an old Windows/WSL)")
    first = next((e.path for e in ld_entries if e.soname == "libcuda.so.1"), None)
    if first and not first.startswith("/usr/lib/wsl/"):
        problems.append(f"the loader finds {first} before WSL's libcuda: a Linux NVIDIA driver was installed "
                        "inside WSL")
    if problems:
        return fail(
            "; ".join(problems),
            "install the NVIDIA driver on Windows only (never a Linux driver inside WSL: "
            "`sudo apt remove --purge '^nvidia-.*'` removes one), update WSL (`wsl --update`) and use WSL2",
        )
    return ok("WSL2 with /usr/lib/wsl/lib/libcuda.so.1 and /dev/dxg; " + "; ".join(notes))

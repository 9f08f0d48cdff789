"""Generated fleet files: N nodes in G groups of real GPU models and drivers, for the
fleet tests and bench/bench_fleet.py. The GPU names and compute capabilities are
NVIDIA's (CUDA GPUs page, as in data/gpus.toml); the drivers are real release numbers
of the 535, 550, 570 and 580 branches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# (hostname prefix, GPU name, compute capability, GPUs per node, driver, glibc)
KINDS = [
    ("h100-", "NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06", "2.35"),
    ("a100-", "NVIDIA A100-SXM4-80GB", "8.0", 8, "535.183.01", "2.35"),
    ("titan", "TITAN V", "7.0", 1, "580.65.06", "2.35"),
    ("l40s", "NVIDIA L40S", "8.9", 4, "570.133.20", "2.35"),
    ("h200-", "NVIDIA H200", "9.0", 8, "580.159.04", "2.39"),
    ("v100-", "Tesla V100-SXM2-32GB", "7.0", 8, "550.127.08", "2.28"),
    ("a10g", "NVIDIA A10G", "8.6", 1, "550.127.08", "2.35"),
    ("gh200-", "NVIDIA GH200 480GB", "9.0", 1, "580.65.06", "2.35"),
    ("l4-", "NVIDIA L4", "8.9", 8, "570.133.20", "2.35"),
    ("a40-", "NVIDIA A40", "8.6", 4, "535.183.01", "2.31"),
    ("rtx6k", "NVIDIA RTX 6000 Ada Generation", "8.9", 2, "580.65.06", "2.39"),
    ("t4-", "Tesla T4", "7.5", 4, "550.127.08", "2.35"),
]


def node_facts(gpu: str, cc: str, count: int, driver: str, glibc: str = "2.35",
               arch: str = "x86_64") -> dict[str, Any]:
    """One node's `torchfit detect --json` object."""
    return {
        "driver_version": driver,
        "gpus": [{"index": i, "name": gpu, "compute_capability": cc, "memory_mib": 81559,
                  "uuid": f"GPU-{i:08x}", "pci_bus_id": f"00000000:{16 + i:02X}:00.0"} for i in range(count)],
        "topology": {}, "glibc": glibc, "os": "ubuntu:22.04", "wsl": False, "arch": arch,
        "pythons": [{"version": "3.12.3", "path": "/usr/bin/python3.12", "source": "path"}],
        "pyenv": None, "rocm_version": None, "nvidia_failure": None, "reasons": {},
    }


def fleet_data(nodes: int, groups: int, missing: dict[str, str] | None = None) -> dict[str, Any]:
    """A fleet file's object: `nodes` nodes spread over the first `groups` KINDS."""
    from torchfit.fleet.model import Fleet, Group, Missing, fleet_to_json

    kinds = KINDS[:groups]
    per = [nodes // groups + (1 if k < nodes % groups else 0) for k in range(groups)]
    gone = set()
    from torchfit.fleet.hostlist import expand_hostlist

    for text in missing or {}:
        gone.update(expand_hostlist(text))
    out = []
    for (prefix, gpu, cc, count, driver, glibc), n in zip(kinds, per):
        width = max(2, len(str(n)))
        names = tuple(f"{prefix}{i:0{width}d}" for i in range(1, n + 1) if f"{prefix}{i:0{width}d}" not in gone)
        arch = "aarch64" if prefix == "gh200-" else "x86_64"
        out.append(Group(names, "", node_facts(gpu, cc, count, driver, glibc, arch)))
    lost = tuple(Missing(tuple(expand_hostlist(t)), why) for t, why in (missing or {}).items())
    return fleet_to_json(Fleet(tuple(out), lost, "generated (tests/support/fleets.py)", ""))


def fleet_file(tmp: Path, nodes: int, groups: int, missing: dict[str, str] | None = None) -> Path:
    path = tmp / f"fleet-{nodes}x{groups}.json"
    path.write_text(json.dumps(fleet_data(nodes, groups, missing), indent=1))
    return path


def distinct_fleet_data(groups: int, per_group: int = 2) -> dict[str, Any]:
    """A fleet file's object of `groups` groups that all differ: the KINDS in turn, each
    with a driver of its branch whose minor and patch numbers are the group's own (no two
    groups share a signature, so none merge), `per_group` nodes each (g00000n[1-2], ...)."""
    from torchfit.fleet.model import Fleet, Group, fleet_to_json

    out = []
    for i in range(groups):
        _, gpu, cc, count, driver, glibc = KINDS[i % len(KINDS)]
        branch = driver.split(".")[0]
        drv = f"{branch}.{100 + i // len(KINDS)}.{i % 100:02d}"
        names = tuple(f"g{i:05d}n{j}" for j in range(1, per_group + 1))
        out.append(Group(names, "", node_facts(gpu, cc, count, drv, glibc)))
    return fleet_to_json(Fleet(tuple(out), (), "generated (tests/support/fleets.py, distinct groups)", ""))

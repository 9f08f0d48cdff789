"""`torchfit doctor --node-check`: the fast health check of a node, for Slurm's
`HealthCheckProgram` and `Prolog` (docs/cluster.md "Gate the nodes").

Only the checks that need no Python environment run: the driver area (nvidia-smi
answers, the module is loaded and matches its libraries, /dev/nvidia* open, the
kernel log) and the environment area (CUDA_VISIBLE_DEVICES, NCCL_* switches,
NCCL_SOCKET_IFNAME, /dev/shm). No worker starts and torch is never imported, so it
takes the time of a few nvidia-smi calls; the host tools run side by side.
The verdicts are doctor's own checks (the same functions, the same words).
"""

from __future__ import annotations

import time

from torchfit.background import Background
from torchfit.checks import Check, Status
from torchfit.doctor.context import Context
from torchfit.doctor.model import load_all, run_checks
from torchfit.progress import Progress

AREAS = ("driver", "environment")


def node_check(ctx: Context, progress: Progress | None = None) -> tuple[list[Check], float]:
    """Run the driver and environment checks on this node; (checks, seconds). `progress`:
    where a failing check's traceback goes."""
    t0 = time.monotonic()
    specs = [s for s in load_all() if s.area in AREAS]
    # The slow part is the tools (each nvidia-smi initialises NVML): start them together.
    jobs = [lambda: ctx.nvidia, lambda: ctx.smi, lambda: ctx.pci, lambda: ctx.ldconfig,
            lambda: ctx.tool(["dmesg"])]
    for started in [Background(_quietly, job) for job in jobs]:
        started.wait()
    checks = run_checks(ctx, specs, progress)
    return checks, time.monotonic() - t0


def _quietly(job: object) -> None:
    try:
        job()  # type: ignore[operator]
    except Exception:  # the check that needs the fact reports the reason
        pass


def format_node_line(checks: list[Check], seconds: float, limit: int = 200) -> str:
    """One line: "ok: ..." or the first failure "nvidia-smi: <evidence>" (Slurm's drain
    reason takes it as it is, so it stays short and on one line)."""
    failed = [c for c in checks if c.status == Status.FAIL]
    if not failed:
        gpus = next((c.summary for c in checks if c.name == "nvidia-smi"), "")
        warned = [c.name for c in checks if c.status in (Status.WARN, Status.UNKNOWN)]
        text = f"ok: {gpus}; {len(checks)} checks in {seconds:.2f} s" + (
            f" (warn/unknown: {', '.join(warned)})" if warned else "")
    else:
        first = failed[0]
        more = f" (+{len(failed) - 1} more: {', '.join(c.name for c in failed[1:])})" if len(failed) > 1 else ""
        summary = first.summary
        if summary.startswith(f"{first.name}: "):  # the evidence already names its tool: say it once
            summary = summary[len(first.name) + 2:]
        text = f"{first.name}: {summary}{more}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"

"""`torchfit doctor`: explain what is wrong with a GPU / PyTorch setup and how to fix it.

One module per area, each registering its checks with `model.check`:
driver (can anything talk to the GPU), build (the torch build against the host),
shadowing (which NCCL / cuDNN / CUDA runtime torch really loads), environment
(CUDA_* and NCCL_* variables, /dev/shm), topology (NVLink, sockets, WSL) and logs
(`--log FILE`: known error messages mapped to their cause). `context` does all the
I/O, `parse` holds the pure parsers, and `doctor_worker.py` runs inside the
target environment's Python. docs/doctor.md lists every check.
"""

from __future__ import annotations

from torchfit.checks import Check
from torchfit.doctor.context import Context
from torchfit.doctor.model import load_all, run_checks
from torchfit.progress import Progress

__all__ = ["diagnose"]


def diagnose(ctx: Context, progress: Progress | None = None) -> list[Check]:
    """Gather the facts, then run every registered check against `ctx`, in area order
    (`progress`: where a failing check's traceback goes)."""
    specs = load_all()
    ctx.gather()
    return run_checks(ctx, specs, progress)

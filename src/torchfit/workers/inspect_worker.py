"""torchfit verify, inspection: one process in the target environment.

Usage: PYTHON inspect_worker.py OUT.jsonl

Writes JSON lines to OUT.jsonl: `stage` heartbeats, `fact` lines (one per
finding, merged by the orchestrator), then `done`. A missing torch is a fact,
not a crash. Standard library and torch only (never torchfit); Python 3.8+.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchfit_runtime as rt


def gpu_facts(torch: Any, i: int) -> dict:
    t = torch
    p = t.cuda.get_device_properties(i)
    uuid = getattr(p, "uuid", None)
    return {
        "index": i,
        "name": getattr(p, "name", None),
        "capability": f"{p.major}.{p.minor}",
        "gcn_arch": getattr(p, "gcnArchName", None),
        "memory_mib": int(getattr(p, "total_memory", 0)) // (1024 * 1024),
        "uuid": str(uuid) if uuid is not None else None,
        "pci_bus_id": getattr(p, "pci_bus_id", None),
    }


def run_kernels(torch: Any, i: int) -> dict:
    """A real kernel on GPU i: an exact reduction and a matmul checked against the CPU."""
    t = torch
    start = time.perf_counter()
    dev = t.device("cuda", i)
    n = 1 << 20
    got = t.arange(n, device=dev, dtype=t.float64).sum().item()
    if got != n * (n - 1) / 2:
        return {"index": i, "ok": False, "error": f"arange({n}).sum() gave {got!r}"}
    gen = t.Generator().manual_seed(1234 + i)
    a = t.randn(128, 128, generator=gen)
    want = a @ a
    b = a.to(dev)
    res = (b @ b).cpu()
    t.cuda.synchronize(dev)
    if not t.allclose(res, want, rtol=1e-2, atol=1e-2):
        err = (res - want).abs().max().item()
        return {"index": i, "ok": False, "error": f"matmul differs from the CPU by {err:.3g}"}
    return {
        "index": i,
        "ok": True,
        "error": None,
        "ms": round((time.perf_counter() - start) * 1000, 1),
    }


def run_conv(torch: Any) -> dict:
    """One cuDNN (MIOpen) convolution on GPU 0, checked against the CPU."""
    t = torch
    start = time.perf_counter()
    gen = t.Generator().manual_seed(99)
    x = t.randn(2, 3, 16, 16, generator=gen)
    w = t.randn(4, 3, 3, 3, generator=gen)
    want = t.nn.functional.conv2d(x, w)
    # TF32 (on by default for cuDNN convolutions on Ampere and later) would differ
    # from the CPU by more than the tolerance; this checks cuDNN runs, not TF32.
    tf32 = t.backends.cudnn.allow_tf32
    t.backends.cudnn.allow_tf32 = False
    try:
        got = t.nn.functional.conv2d(x.cuda(0), w.cuda(0)).cpu()
    finally:
        t.backends.cudnn.allow_tf32 = tf32
    ok = bool(t.allclose(got, want, rtol=1e-2, atol=1e-2))
    return {
        "ok": ok,
        "error": None if ok else "conv2d differs from the CPU",
        "ms": round((time.perf_counter() - start) * 1000, 1),
    }


def inspect(rep: rt.Reporter) -> None:
    rep.line("fact", key="python", value=rt.python_info())
    rep.line("fact", key="host", value=rt.host_info())
    rep.line("fact", key="env", value=rt.env_snapshot())
    rep.stage("import-torch")
    start = time.perf_counter()
    try:
        import torch
    except BaseException as exc:  # ImportError, or a broken install raising anything
        rep.line(
            "fact",
            key="torch_error",
            value=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc()[-4000:],
        )
        return
    rep.line("fact", key="import_s", value=round(time.perf_counter() - start, 3))
    rep.line("fact", key="torch", value=rt.torch_info(torch))
    rep.line("fact", key="arch_list", value=list(torch.cuda.get_arch_list()))

    rep.stage("cuda-init")
    count, cuda_error = 0, None
    built_for_gpu = bool(torch.version.cuda or getattr(torch.version, "hip", None))
    try:
        if built_for_gpu:
            torch.cuda.init()  # raises with the driver's reason where is_available() only says False
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:
        cuda_error = f"{type(exc).__name__}: {exc}"
    gpus = []
    for i in range(count):
        try:
            gpus.append(gpu_facts(torch, i))
        except Exception as exc:
            gpus.append({"index": i, "error": f"{type(exc).__name__}: {exc}"})
    # The orchestrator may start torchrun as soon as it sees this line.
    rep.line("fact", key="devices", value={"count": count, "gpus": gpus, "error": cuda_error})

    rep.stage("libraries")
    libs = rt.runtime_libs(torch)
    if count and libs["nccl"]["path"] is None and torch.version.cuda:
        # No libnccl mapped after import and CUDA init: a build that loads it lazily.
        # A one-GPU NCCL all-reduce makes it load, so the truth can be read.
        try:
            torch.cuda.nccl.all_reduce([torch.ones(1, device="cuda:0")])
            torch.cuda.synchronize(0)
        except Exception as exc:
            libs["nccl_trigger_error"] = f"{type(exc).__name__}: {exc}"
        libs["nccl"] = rt.probe_nccl()
    rep.line("fact", key="libs", value=libs)
    rep.line("fact", key="summary", value=rt.summary(torch, libs))

    rep.stage("kernels")
    kernels = []
    for i in range(count):
        rep.stage("kernels", step=f"gpu {i}")
        try:
            kernels.append(run_kernels(torch, i))
        except Exception as exc:
            kernels.append({"index": i, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
    rep.line("fact", key="kernels", value=kernels)
    if count and libs.get("cudnn") is not None:
        rep.stage("kernels", step="conv")
        try:
            conv = run_conv(torch)
        except Exception as exc:
            conv = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        rep.line("fact", key="conv", value=conv)


def main(argv: list) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: inspect_worker.py OUT.jsonl\n")
        return 2
    rep = rt.Reporter(argv[1], who="inspect")
    rep.line("start", pid=os.getpid())
    rt.start_watchdog(float("inf"), rep)  # its parent is torchfit: gone, so is this
    try:
        inspect(rep)
    except BaseException as exc:
        rep.error(exc)
        rep.close()
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)
    rep.line("done")
    rep.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Same reason as the DDP worker: report first, then leave without teardown.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

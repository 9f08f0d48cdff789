"""The least a DDP smoke test must do, as a bare torchrun script: the anchor verify is timed against.

    python -m torch.distributed.run --standalone --nproc-per-node N bench/ddp_anchor.py [--backend nccl|gloo]
        [--sizes 1048576,...] [--plan '{"1048576": [5, 50], ...}']

Per rank, the same work `torchfit verify`'s DDP worker does: import torch, pick the
GPU, init the process group, all-reduce a 4 KiB and a 4 MiB tensor and check the
sums, train the same small model 3 DDP steps, compare the parameters across ranks
(MAX/MIN all-reduce), and, when --sizes is given, time all-reduces of those sizes with
the same warmup/iteration plan (bench_verify.py passes verify's own). Then it exits
the way verify's workers do (os._exit after flushing: gloo workers that ran DDP can
abort in interpreter teardown, docs/architecture.md, Contracts). Rank 0 prints one JSON line.

None of verify's evidence is gathered: no inspection process, no runtime-library
truth, no heartbeats, no watchdog. Standard library and torch only.

It repeats src/torchfit/workers/ddp_worker.py's work on purpose (the duplicates tool
will pair them): an anchor that imported torchfit's worker would time torchfit, not the
least a bare script must do. Change the worker's DDP work and change this with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None, help="nccl (default when CUDA is there) or gloo")
    ap.add_argument("--sizes", default="", help="comma list of all-reduce sizes in bytes to time")
    ap.add_argument("--plan", default="{}", help='JSON {"bytes": [warmup, iters]}')
    args = ap.parse_args()
    t0 = time.perf_counter()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    t_import = time.perf_counter() - t0
    rank, local, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    t = time.perf_counter()
    dist.init_process_group(backend=backend)
    t_init = time.perf_counter() - t

    small = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(small)
    n = 1 << 20
    big = torch.arange(n, dtype=torch.float32, device=device) * (rank + 1)
    dist.all_reduce(big)
    want = world * (world + 1) / 2
    ok = bool((small == want).all().item()) and bool(
        (big == torch.arange(n, dtype=torch.float32, device=device) * want).all().item())

    t = time.perf_counter()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
    ddp = DDP(model, device_ids=[local] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(3):
        x = torch.randn(16, 32, generator=gen).to(device)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    ok = ok and float((hi - lo).abs().max().item()) == 0.0
    t_ddp = time.perf_counter() - t

    rows = []
    sizes = [int(s) for s in args.sizes.split(",") if s]
    plan = json.loads(args.plan)
    if sizes:
        cuda = device.type == "cuda"
        buf = torch.zeros(max(sizes) // 4, dtype=torch.float32, device=device)
        timer = torch.zeros(1, dtype=torch.float64, device=device)
        for nbytes in sizes:
            view = buf[: nbytes // 4]
            warmup, iters = plan.get(str(nbytes), (5, 20))
            for _ in range(warmup):
                dist.all_reduce(view)
            dist.all_reduce(timer)
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(view)
            if cuda:
                torch.cuda.synchronize(device)
            timer.fill_((time.perf_counter() - start) / iters)
            dist.all_reduce(timer, op=dist.ReduceOp.MAX)
            algbw = nbytes / float(timer.item()) / 1e9
            rows.append({"bytes": nbytes, "busbw": round(algbw * 2 * (world - 1) / world, 3)})
    if rank == 0:
        print(json.dumps({"ok": ok, "world": world, "backend": backend, "import_s": round(t_import, 3),
                          "init_s": round(t_init, 3), "ddp_s": round(t_ddp, 3), "bandwidth": rows}), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    raise SystemExit(main())

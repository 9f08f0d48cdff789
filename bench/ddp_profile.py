"""Where a DDP smoke test's seconds go on one GPU (issue 37): one process, a 1-rank NCCL
group on a TCP store, then the DDP phase verify's worker runs (the same model, 3 steps),
each step timed apart, and the modules DDP's constructor imports counted.

    python bench/ddp_profile.py      (on the GPU machine; NCCL_NVLS_ENABLE=0 etc. exported)

Measured 2026-12-07 on one H100 (bench/records/gpu-verify-floor-2026-12-07): the DDP
constructor takes ~4.0 s, importing 883 modules (torch's compiler stack: sympy, mpmath...);
the three steps after it 0.25 s. Standard library and torch only.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time


def main() -> None:
    took: dict[str, float] = {}
    t = time.monotonic()
    import torch
    import torch.distributed as dist

    took["import"] = time.monotonic() - t
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)
    t = time.monotonic()
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
    x = torch.ones(1 << 20, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    took["nccl"] = time.monotonic() - t
    before = set(sys.modules)
    t = time.monotonic()
    from torch.nn.parallel import DistributedDataParallel as DDP

    took["import_ddp"] = time.monotonic() - t
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev)
    t = time.monotonic()
    ddp = DDP(model, device_ids=[0])
    torch.cuda.synchronize()
    took["ddp_ctor"] = time.monotonic() - t
    imported = set(sys.modules) - before
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000)
    for step in range(3):  # verify's worker: 3 steps
        x = torch.randn(16, 32, generator=gen).to(dev)
        t = time.monotonic()
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        took[f"step{step}"] = time.monotonic() - t
    print(json.dumps({k: round(v, 3) for k, v in took.items()}))
    print(f"modules imported by DDP's import and constructor: {len(imported)}",
          sorted(m for m in imported if "." not in m))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

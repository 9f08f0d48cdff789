"""The one-process floor of a GPU verify (issue 37): the least any check that proves the GPU
and NCCL work must pay. One process imports torch, initialises CUDA, forms a 1-rank NCCL
process group (a TCP store on 127.0.0.1, no torchrun), all-reduces 4 MiB once and checks the
sum, then exits as verify's workers do (os._exit after flushing).

    python bench/verify_floor.py        # prints one JSON line: its own phase times

Standard library and torch only (it times the floor, not torchfit).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time


def main() -> int:
    t0 = time.monotonic()
    import torch
    import torch.distributed as dist

    t_import = time.monotonic()
    torch.cuda.init()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    t_cuda = time.monotonic()
    with socket.socket() as s:  # a free port for the store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
    x = torch.ones(1 << 20, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    ok = bool(x.sum().item() == (1 << 20))
    t_nccl = time.monotonic()
    print(json.dumps({"ok": ok, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                      "import": round(t_import - t0, 3), "cuda_init": round(t_cuda - t_import, 3),
                      "nccl_allreduce": round(t_nccl - t_cuda, 3), "in_process": round(t_nccl - t0, 3)}))
    sys.stdout.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    raise SystemExit(main())

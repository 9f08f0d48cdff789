"""Where a DDP smoke test's seconds go on one GPU (issue 37): one process, a 1-rank NCCL
group on a TCP store, then the DDP phase verify's worker runs (the same model, 3 steps),
each step timed apart, and the modules DDP's constructor imports counted.

    python bench/ddp_profile.py      (on the GPU machine; NCCL_NVLS_ENABLE=0 etc. exported)

Measured 2026-12-07 on one H100 (bench/records/gpu-verify-floor-2026-12-07): the DDP
constructor takes ~4.0 s, importing 883 modules (torch's compiler stack: sympy, mpmath...);
the three steps after it 0.25 s. Standard library and torch only.
"""
import os, socket, sys, time, json
T = {}
t = time.monotonic()
import torch, torch.distributed as dist
T["import"] = time.monotonic() - t
dev = torch.device("cuda", 0); torch.cuda.set_device(dev)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
store = dist.TCPStore("127.0.0.1", port, 1, True)
t = time.monotonic(); dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=dev)
x = torch.ones(1 << 20, device=dev); dist.all_reduce(x); torch.cuda.synchronize(); T["nccl"] = time.monotonic() - t
mods0 = set(sys.modules)
t = time.monotonic(); from torch.nn.parallel import DistributedDataParallel as DDP; T["import_ddp"] = time.monotonic() - t
torch.manual_seed(0)
t = time.monotonic()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev); torch.cuda.synchronize()
T["model_to"] = time.monotonic() - t
t = time.monotonic(); ddp = DDP(model, device_ids=[0]); torch.cuda.synchronize(); T["ddp_ctor"] = time.monotonic() - t
mods1 = set(sys.modules)
t = time.monotonic(); opt = torch.optim.SGD(ddp.parameters(), lr=0.1); T["sgd"] = time.monotonic() - t
gen = torch.Generator().manual_seed(1000)
for step in range(3):
    x = torch.randn(16, 32, generator=gen).to(dev)
    t = time.monotonic(); loss = ddp(x).pow(2).mean(); torch.cuda.synchronize(); T[f"fwd{step}"] = time.monotonic() - t
    t = time.monotonic(); opt.zero_grad(); loss.backward(); torch.cuda.synchronize(); T[f"bwd{step}"] = time.monotonic() - t
    m = set(sys.modules)
    t = time.monotonic(); opt.step(); torch.cuda.synchronize(); T[f"step{step}"] = time.monotonic() - t
    if step == 0:
        new_in_step = sorted(set(sys.modules) - m)
print(json.dumps({k: round(v, 3) for k, v in T.items()}))
print("modules new in DDP import+ctor:", len(mods1 - mods0), sorted(m for m in mods1 - mods0 if m.count(".") <= 1)[:40])
print("modules new in first opt.step:", len(new_in_step), [m for m in new_in_step if m.count(".") <= 1][:40])
sys.stdout.flush(); os._exit(0)

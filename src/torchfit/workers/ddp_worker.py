"""torchfit verify, DDP smoke test and bandwidth sweep: one torchrun worker per rank.

Usage (by the orchestrator): PYTHON launch_worker.py --start-method forkserver ... ddp_worker.py CONFIG.json
(torchrun with `entry` as its function entrypoint), or as torchrun's script:
PYTHON -m torch.distributed.run ... ddp_worker.py CONFIG.json

Each rank appends JSON lines to RESULTS/rank-<RANK>.jsonl: a `stage` heartbeat
before every stage (and `step: "collective"` right before it enters a
collective, so a stall names the rank that never joined), `check` and data lines,
then `done`. Its stdout and stderr go to RESULTS/rank-<RANK>.log. It reports
everything BEFORE teardown and ends with os._exit: gloo workers that ran DDP abort
at interpreter exit in about 1 run in 10-15 (docs/architecture.md, Contracts), so the exit
code of a rank that reported `done` carries no information.

Control flow is identical on every rank (a failed check is recorded, never a reason
to leave early) so that no rank waits in a collective the others skipped.
Standard library and torch only (never torchfit); Python 3.8+.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchfit_runtime as rt


def exchange(dist: Any, rank: int, world: int, info: dict, timeout_s: float) -> list:
    """Every rank's runtime summary, through the rendezvous store (no NCCL needed).

    Ranks with different NCCL versions can hang in NCCL's own init, so the versions
    travel before any NCCL collective, over the TCP store torchrun already proved.
    """
    d = dist
    from datetime import timedelta

    get_store = getattr(d.distributed_c10d, "_get_default_store", None)
    if get_store is None:  # fall back to a gloo group (public API)
        group = d.new_group(backend="gloo")
        out = [None] * world
        d.all_gather_object(out, info, group=group)
        return out
    store = get_store()
    prefix = "torchfit-verify/runtime/"
    store.set(prefix + str(rank), json.dumps(info, default=str))
    keys = [prefix + str(r) for r in range(world)]
    store.wait(keys, timedelta(seconds=timeout_s))
    return [json.loads(store.get(k).decode("utf-8")) for k in keys]


def check(rep: rt.Reporter, name: str, ok: bool, **detail: object) -> None:
    rep.line("check", name=name, ok=bool(ok), **detail)


def sweep(
    torch: Any, dist: Any, rep: rt.Reporter, device: Any, cfg: dict, world: int
) -> list:
    """All-reduce bus bandwidth per size, as nccl-tests computes it.

    busbw = algbw * 2(n-1)/n (nccl-tests, "AllReduce" in
    https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md); the time per call is
    the slowest rank's (all-reduce MAX), after warmup, float32.
    """
    t = torch
    d = dist
    sizes = [int(s) for s in cfg["sizes"]]
    cuda = device.type == "cuda"
    buf = t.zeros(max(sizes) // 4, dtype=t.float32, device=device)
    timer = t.zeros(1, dtype=t.float64, device=device)
    rows = []
    for nbytes in sizes:
        rep.stage("bandwidth", step=f"{nbytes} bytes")
        view = buf[: nbytes // 4]
        warmup, iters = cfg["plan"][str(nbytes)]
        for _ in range(warmup):
            d.all_reduce(view)
        d.all_reduce(timer)  # a barrier that also drains the warmup
        if cuda:
            t.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(iters):
            d.all_reduce(view)
        if cuda:
            t.cuda.synchronize(device)
        timer.fill_((time.perf_counter() - start) / iters)
        d.all_reduce(timer, op=d.ReduceOp.MAX)
        seconds = float(timer.item())
        algbw = nbytes / seconds / 1e9
        rows.append(
            {
                "bytes": nbytes,
                "iters": iters,
                "time_us": round(seconds * 1e6, 2),
                "algbw": round(algbw, 3),
                "busbw": round(algbw * 2 * (world - 1) / world, 3),
            }
        )
    del buf
    return rows


def run(cfg: dict, rep: rt.Reporter, ids: dict) -> None:
    rank, local, world = ids["rank"], ids["local_rank"], ids["world_size"]
    backend = cfg["backend"]
    timeout_s = float(cfg["pg_timeout"])

    rep.stage("import")
    start = time.perf_counter()
    inherited = "torch" in sys.modules  # forked from a fork server that imported it (launch_worker.py)
    # and DDP's compiler stack, which its constructor imports (1-4 s when not inherited)
    dynamo_inherited = "torch._dynamo" in sys.modules
    import torch
    import torch.distributed as dist

    rep.line(
        "timing", what="import", seconds=round(time.perf_counter() - start, 3),
        inherited=inherited, dynamo_inherited=dynamo_inherited,
    )

    rep.stage("device")
    if backend == "nccl":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if local >= count:
            cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
            shown = f" (CUDA_VISIBLE_DEVICES={cvd!r})" if cvd is not None else ""
            raise RuntimeError(
                f"local rank {local} needs GPU {local} but torch {torch.__version__} "
                f"sees {count} GPU(s){shown}"
            )
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")

    rep.stage("libraries")
    libs = rt.runtime_libs(torch)
    info = rt.summary(torch, libs)
    # torchrun's c10d rendezvous numbers nodes in join order (group_rank); the
    # node rank the user gave is the label people recognise.
    info.update(
        rank=rank, local_rank=local, group_rank=ids["group_rank"], node_rank=cfg.get("node_rank")
    )
    rep.line("runtime", info=info, torch=rt.torch_info(torch))

    rep.stage("init")
    from datetime import timedelta

    rep.stage("init", step="collective")
    start = time.perf_counter()
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    rep.line("timing", what="init", seconds=round(time.perf_counter() - start, 3))

    rep.stage("peers")
    rep.stage("peers", step="collective")
    peers = exchange(dist, rank, world, info, timeout_s)
    if local == 0:
        rep.line("peers", peers=peers)

    rep.stage("allreduce")
    rep.stage("allreduce", step="collective")
    small = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(small)
    want_small = world * (world + 1) / 2
    n = 1 << 20  # 4 MiB: a size large enough for a different algorithm than 4 KiB
    big = torch.arange(n, dtype=torch.float32, device=device) * (rank + 1)
    dist.all_reduce(big)
    want_big = torch.arange(n, dtype=torch.float32, device=device) * want_small
    bad_small = int((small != want_small).sum().item())
    bad_big = int((big != want_big).sum().item())
    check(
        rep,
        "allreduce",
        bad_small == 0 and bad_big == 0,
        expected=want_small,
        got=float(small[0].item()),
        wrong_elements=bad_small + bad_big,
    )
    after = rt.probe_nccl()
    if after.get("path") != libs["nccl"].get("path"):
        # Loaded lazily, on the first collective: this is the one that ran.
        rep.line("runtime-late", nccl=after)

    rep.stage("ddp")
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    ).to(device)
    before = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
    rep.stage("ddp", step="collective")
    start = time.perf_counter()
    ddp = DDP(model, device_ids=[local] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)  # different data on every rank
    losses = []
    for _step in range(int(cfg.get("ddp_steps", 3))):
        x = torch.randn(16, 32, generator=gen).to(device)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    rep.line("timing", what="ddp", seconds=round(time.perf_counter() - start, 3))

    rep.stage("params")
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    hi, lo = flat.clone(), flat.clone()
    rep.stage("params", step="collective")
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    spread = float((hi - lo).abs().max().item())
    moved = float((flat.cpu() - before.cpu()).abs().max().item())
    check(
        rep,
        "params",
        spread == 0.0 and moved > 0.0,
        spread=spread,
        moved=moved,
        checksum=float(flat.double().sum().item()),
        losses=losses,
    )

    if cfg.get("sizes"):
        rep.stage("bandwidth")
        start = time.perf_counter()
        rows = sweep(torch, dist, rep, device, cfg, world)
        if local == 0:
            rep.line("bandwidth", rows=rows, world_size=world)
        rep.line("timing", what="bandwidth", seconds=round(time.perf_counter() - start, 3))


def rank(config_path: str) -> int:
    """One rank, from torchrun's environment: 0 when it reported `done`, else 1."""
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    ids = {
        "rank": int(os.environ["RANK"]),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "world_size": int(os.environ["WORLD_SIZE"]),
        "group_rank": int(os.environ.get("GROUP_RANK", "0")),
        "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
    }
    base = os.path.join(cfg["results"], f"rank-{ids['rank']}")
    rt.redirect_output(base + ".log")
    rep = rt.Reporter(base + ".jsonl", rank=ids["rank"])
    rep.line("start", pid=os.getpid(), ppid=os.getppid(), host=rt.host_info()["hostname"], **ids)
    rt.start_watchdog(float(cfg["deadline"]), rep, owner=cfg.get("owner_pid"))
    code = 0
    try:
        run(cfg, rep, ids)
        rep.line("done")
    except BaseException as exc:
        rep.error(exc)
        code = 1
    rep.close()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def entry(config_path: str) -> None:
    """The rank as torchrun's function entrypoint (launch_worker.py), in a process forked
    from torchrun's fork server: a failure leaves with its exit code at once; success returns to
    torchrun's wrapper, which hands the return value over and ends the process with os._exit
    (multiprocessing's forkserver start): no interpreter teardown either way."""
    code = rank(config_path)
    if code:
        os._exit(code)


def main(argv: list) -> int:
    code = rank(argv[1])
    # No interpreter teardown: see the module docstring.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""`torchfit verify` beside a bare torchrun smoke test doing the same work, alternating runs.

    PYTHONPATH=src python3 bench/bench_verify.py --python ENV/bin/python --nproc 2 [--runs 3]
        [--json FILE] [-- EXTRA VERIFY ARGS]

Each round runs, in alternating order (verify first, then anchor first, ...):

- verify: `python -m torchfit verify --python PY --nproc N --json` (this checkout);
- anchor: `PY -m torch.distributed.run --standalone --nproc-per-node N bench/ddp_anchor.py`
  with the same backend and, where verify sweeps (more than one rank), the same sizes and
  the same warmup/iteration plan (verify's own `iteration_plan`).

Both inherit this process's environment: on the lent H200s export
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 first.
Prints medians of wall time, verify over anchor (ratio of the medians, and the median of
each round's ratio: the same round's load falls on both); with --json writes every run (verify's
verdict, phase timings and busbw rows; the anchor's own timings and busbw rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ANCHOR = ROOT / "bench" / "ddp_anchor.py"


def _plan(sizes: tuple[int, ...]) -> dict[str, list[int]]:
    try:
        from torchfit.verify.sizes import iteration_plan
    except ImportError:  # before verify became a package
        from torchfit.verify import iteration_plan  # type: ignore[attr-defined,no-redef]
    return {str(k): list(v) for k, v in iteration_plan(sizes).items()}


def _default_sizes(backend: str) -> tuple[int, ...]:
    try:
        from torchfit.verify.sizes import DEFAULT_SIZES
    except ImportError:
        from torchfit.verify import DEFAULT_SIZES  # type: ignore[attr-defined,no-redef]
    return DEFAULT_SIZES if backend == "nccl" else ()  # verify sweeps gloo only when asked to


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_verify(python: str, nproc: int, backend: str, extra: list[str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "torchfit", "verify", "--python", python, "--nproc", str(nproc),
            "--backend", backend, "--json", *extra]
    start = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=_env())
    wall = time.monotonic() - start
    try:
        report = json.loads(res.stdout)
    except ValueError:
        raise SystemExit(f"verify printed no JSON (exit {res.returncode}):\n{res.stderr[-3000:]}") from None
    bw = report.get("bandwidth") or {}
    return {"seconds": round(wall, 3), "exit": res.returncode, "verdict": report.get("verdict"),
            "timings": report.get("timings"),
            "checks": {c["name"]: c["status"] for c in report.get("checks", [])},
            "bandwidth": [{"bytes": r["bytes"], "busbw": r["busbw"]} for r in bw.get("rows") or []],
            "stderr_tail": res.stderr.splitlines()[-12:]}


def run_anchor(python: str, nproc: int, backend: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    argv = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", "0", str(ANCHOR), "--backend", backend]
    if sizes:
        argv += ["--sizes", ",".join(map(str, sizes)), "--plan", json.dumps(_plan(sizes))]
    start = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=_env())
    wall = time.monotonic() - start
    line = next((ln for ln in reversed(res.stdout.splitlines()) if ln.startswith("{")), None)
    if res.returncode != 0 or line is None:
        raise SystemExit(f"the anchor failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return {"seconds": round(wall, 3), "exit": res.returncode, **json.loads(line)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="the environment's interpreter")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="default: nccl when nvidia-smi is on PATH, else gloo")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured rounds first (the first torch import reads it from disk)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- extra verify arguments")
    args = ap.parse_args()
    extra = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    backend = args.backend or ("nccl" if subprocess.run(["sh", "-c", "command -v nvidia-smi"],
                                                        capture_output=True).returncode == 0 else "gloo")
    # verify sweeps only with more than one rank (a one-rank all-reduce moves nothing).
    sizes = _default_sizes(backend) if args.nproc > 1 else ()
    for _ in range(args.warmup):
        run_verify(args.python, args.nproc, backend, extra)
        run_anchor(args.python, args.nproc, backend, sizes)
    rows: dict[str, list[dict[str, Any]]] = {"verify": [], "anchor": []}
    for i in range(args.runs):
        order = ("verify", "anchor") if i % 2 == 0 else ("anchor", "verify")
        for tool in order:
            r = (run_verify(args.python, args.nproc, backend, extra) if tool == "verify"
                 else run_anchor(args.python, args.nproc, backend, sizes))
            rows[tool].append(r)
            note = f"exit {r['exit']}" + (f", timings {r['timings']}" if tool == "verify" else
                                          f", import {r['import_s']} init {r['init_s']} ddp {r['ddp_s']}")
            print(f"#{i + 1} {tool:7s} {r['seconds']:7.2f} s  ({note})", flush=True)
    med = {t: statistics.median(r["seconds"] for r in rs) for t, rs in rows.items()}
    summary = {"nproc": args.nproc, "backend": backend, "runs": args.runs,
               "verify_median_s": round(med["verify"], 3), "anchor_median_s": round(med["anchor"], 3),
               "verify_over_anchor": round(med["verify"] / med["anchor"], 3),
               # Each round's verify over the same round's anchor: the load of the moment
               # falls on both, so this is the steadier figure on a noisy machine.
               "median_round_ratio": round(statistics.median(
                   v["seconds"] / a["seconds"] for v, a in zip(rows["verify"], rows["anchor"])), 3),
               "verdicts": sorted({str(r["verdict"]) for r in rows["verify"]})}
    for tool in ("verify", "anchor"):
        gib = [b["busbw"] for r in rows[tool] for b in r["bandwidth"] if b["bytes"] == 1 << 30]
        if gib:
            summary[f"{tool}_busbw_1GiB_median"] = round(statistics.median(gib), 1)
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

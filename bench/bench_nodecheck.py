"""`torchfit doctor --node-check` on this node: wall time of the whole command (what
Slurm's HealthCheckProgram and Prolog wait for), the checks' own time, and proof that
torch is never imported.

Target (issue 19): under 2 s on a healthy node. Run it on a GPU node (the lent H200) for
the figure that matters; on a machine without a GPU it times the no-driver path.

    python bench/bench_nodecheck.py                # 11 rounds
    python bench/bench_nodecheck.py -n 21 --json out.json

Each round is a fresh `python -m torchfit doctor --node-check --json` (PYTHONPATH=src of
this checkout); the medians are reported with the verdict line of the last run.
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

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--rounds", type=int, default=11)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-m", "torchfit", "doctor", "--node-check"]
    walls, inner, codes = [], [], []
    data: dict = {}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        res = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
        walls.append(time.perf_counter() - t0)
        data = json.loads(res.stdout)
        inner.append(float(data["seconds"]))
        codes.append(res.returncode)
    line = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120).stdout.strip()
    imports = subprocess.run([sys.executable, "-X", "importtime", "-m", "torchfit", "doctor", "--node-check"],
                             env=env, capture_output=True, text=True, timeout=120).stderr
    torch_modules = sorted({ln.rsplit("|", 1)[-1].strip() for ln in imports.splitlines()
                            if ln.rsplit("|", 1)[-1].strip().split(".")[0] == "torch"})
    record = {
        "what": "torchfit doctor --node-check, fresh process each round",
        "rounds": args.rounds,
        "wall_s_median": round(statistics.median(walls), 3),
        "wall_s_max": round(max(walls), 3),
        "checks_s_median": round(statistics.median(inner), 3),
        "exit_codes": sorted(set(codes)),
        "verdict": line,
        "summary": data.get("summary"),
        "torch_imported": torch_modules,
        "python": sys.version.split()[0],
        "host": os.uname().nodename,
    }
    print(json.dumps(record, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Time `torchfit verify` per phase, N runs: inspection, torchrun phase, and inside it
import / init / DDP steps / sweep (the workers' own timings).

    PYTHONPATH=src python3 bench/bench_verify.py --python ENV/bin/python [--runs 5] [-- VERIFY ARGS]

On the 2x H200: `bash scripts/gpu-check.sh` records the same numbers in its JSON reports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--python", required=True, help="the environment's interpreter")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- extra verify arguments")
    args = ap.parse_args()
    extra = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    samples: dict[str, list[float]] = {}
    verdicts = []
    for _ in range(args.runs):
        start = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "torchfit", "verify", "--python", args.python, "--json", *extra],
            capture_output=True,
            text=True,
            timeout=900,
        )
        wall = time.monotonic() - start
        report = json.loads(res.stdout)
        verdicts.append(report["verdict"])
        samples.setdefault("wall", []).append(wall)
        for key, value in report["timings"].items():
            if isinstance(value, (int, float)):
                samples.setdefault(key, []).append(float(value))
    print(f"{args.runs} runs of torchfit verify --python {args.python} {' '.join(extra)}")
    print(f"verdicts: {sorted(set(verdicts))}")
    print(f"{'phase':<16}{'median s':>10}{'min s':>8}{'max s':>8}")
    for key, values in samples.items():
        print(f"{key:<16}{statistics.median(values):>10.2f}{min(values):>8.2f}{max(values):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

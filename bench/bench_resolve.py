"""Cold `torchfit resolve --json` wall time beside a bare interpreter start.

Target (issue 2): under 300 ms above `python -c pass`. Runs both side by side,
alternating, N times each, and reports medians (these machines are noisy).

    python bench/bench_resolve.py [-n 10] [--facts FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _time(argv: list[str]) -> float:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()[-500:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    py = sys.executable
    # A facts file too, so the resolver's own cost shows apart from probing this host.
    facts = subprocess.run([py, "-m", "torchfit", "detect", "--json"], capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(facts)
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "torchfit resolve --json (probes this host)": [py, "-m", "torchfit", "resolve", "--json"],
        "torchfit resolve --json --facts FILE": [py, "-m", "torchfit", "resolve", "--json", "--facts", fh.name],
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for argv in cases.values():  # warm the OS page cache once; not timed
        _time(argv)
    for _ in range(args.n):
        for name, argv in cases.items():
            times[name].append(_time(argv))
    base = statistics.median(times["python -c pass"])
    result = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        result[name] = {"median_ms": round(med * 1000, 1), "above_bare_ms": round((med - base) * 1000, 1)}
        print(f"{name:48s} median {med * 1000:7.1f} ms   above bare {(med - base) * 1000:7.1f} ms")
    print(json.dumps(result))
    os.unlink(fh.name)


if __name__ == "__main__":
    main()

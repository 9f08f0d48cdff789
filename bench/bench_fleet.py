"""Fleet resolve: `torchfit resolve --facts FLEET.json` for a generated 2,000-node fleet in
12 groups, beside the same resolve for one host, side by side, alternating.

Target (issue 19): the fleet resolve under 1 s of CPU. The fleet file comes from
tests/support/fleets.py (12 real GPU models and drivers, hostlists like h100-[0001-0167]);
the one-host case is its first group's facts as a plain facts file, so the difference is
what a fleet adds (reading 2,000 names, 12 groups instead of one, the binding reasons).

    python bench/bench_fleet.py                 # 11 rounds
    python bench/bench_fleet.py -n 21 --json out.json

CPU is the child's user+system time (getrusage of the children), wall its elapsed time;
each is the median over the rounds. `--in-process` also times load + resolve inside one
process (time.process_time), without interpreter start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fleets import fleet_data


def child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(cpu s, wall s) of one child run; exits 0 or the bench stops."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr[-1000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--rounds", type=int, default=11)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    data = fleet_data(args.nodes, args.groups)
    fleet = tmp / "fleet.json"
    fleet.write_text(json.dumps(data, indent=1))
    one = tmp / "one-host.json"
    one.write_text(json.dumps(data["groups"][0]["facts"]))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XDG_CACHE_HOME=str(tmp / "cache"))
    base = [sys.executable, "-m", "torchfit", "resolve", "--json", "--facts"]
    cases = {"fleet (2,000 nodes, 12 groups)": [*base, str(fleet)], "one host": [*base, str(one)],
             "python -c pass": [sys.executable, "-c", "pass"]}
    child(cases["one host"], env)  # warm the start-up cache once, as on every run but the first
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    order = list(cases)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else reversed(order):
            got[name].append(child(cases[name], env))
    plan = json.loads(subprocess.run(cases["fleet (2,000 nodes, 12 groups)"], env=env, capture_output=True,
                                     text=True).stdout)
    summary = {
        name: {"cpu_s_median": round(statistics.median(c for c, _ in runs), 3),
               "wall_s_median": round(statistics.median(w for _, w in runs), 3), "rounds": len(runs)}
        for name, runs in got.items()
    }
    record = {
        "what": "torchfit resolve --facts FLEET.json (generated) beside one host and a bare interpreter",
        "nodes": args.nodes, "groups": args.groups, "fleet_file_bytes": fleet.stat().st_size,
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "cases": summary,
        "plan": {k: plan.get(k) for k in ("torch", "variant", "hosts")},
        "binding_reasons": [r for r in plan.get("reasons", []) if " rules out " in r],
    }
    for name, s in summary.items():
        print(f"{name:<32} cpu {s['cpu_s_median']:.3f} s   wall {s['wall_s_median']:.3f} s   ({s['rounds']} rounds)")
    print(f"plan: torch {plan.get('torch')} {plan.get('variant')} for {len(plan.get('hosts') or [])} groups")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()

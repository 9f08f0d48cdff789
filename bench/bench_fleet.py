"""Fleet resolve: `torchfit resolve --facts FLEET.json` for a generated 2,000-node fleet in
12 groups, beside the same resolve for one host, side by side, alternating.

Target (issue 19): the fleet resolve under 1 s of CPU. Target (issue 25): a fleet of 2,000
groups that all differ (tests/support/fleets.py distinct_fleet_data: every group its own
driver) under 2 s of CPU; it grew about cubically with the groups before (a resolvelib
identifier per host fact and group). `--before SRC` times the same distinct-groups resolve
with another checkout's src/ (e.g. a `git worktree` of 06e855a) beside this one:
`--before-rounds` rounds (its runs are long), each stopped after `--before-timeout` s. The fleet file comes from
tests/support/fleets.py (12 real GPU models and drivers, hostlists like h100-[0001-0167]);
the one-host case is its first group's facts as a plain facts file, so the difference is
what a fleet adds (reading 2,000 names, 12 groups instead of one, the binding reasons).

    python bench/bench_fleet.py                 # 11 rounds
    python bench/bench_fleet.py -n 21 --json out.json
    python bench/bench_fleet.py --before /tmp/old/src --distinct 2000 --before-rounds 1

CPU is the child's user+system time (getrusage of the children), wall its elapsed time;
each is the median over the rounds. `--in-process` also times load + resolve inside one
process (time.process_time), without interpreter start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fleets import distinct_fleet_data, fleet_data


def child(argv: list[str], env: dict[str, str], timeout: float | None = None) -> tuple[float, float]:
    """(cpu s, wall s) of one child run; exits 0 or the bench stops. A run stopped after
    `timeout` s counts as (inf, inf): "more than the timeout"."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf"), float("inf")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr[-1000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def shown(seconds: float, timeout: float) -> str:
    return f"> {timeout:g} s" if seconds == float("inf") else f"{seconds:.3f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--rounds", type=int, default=11)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--distinct", type=int, default=2000, help="groups of the distinct-groups fleet (0: skip)")
    ap.add_argument("--before", metavar="SRC", help="another checkout's src/ to time the distinct fleet with")
    ap.add_argument("--before-rounds", type=int, default=3)
    ap.add_argument("--before-timeout", type=float, default=300.0)
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
    distinct = f"fleet ({args.distinct:,} distinct groups)"
    if args.distinct:
        many = tmp / "distinct.json"
        many.write_text(json.dumps(distinct_fleet_data(args.distinct), indent=1))
        cases[distinct] = [*base, str(many)]
    child(cases["one host"], env)  # warm the start-up cache once, as on every run but the first
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    order = list(cases)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else reversed(order):
            got[name].append(child(cases[name], env))
    if args.before and args.distinct:
        old_env = dict(env, PYTHONPATH=str(Path(args.before).resolve()), XDG_CACHE_HOME=str(tmp / "cache-before"))
        child(cases["one host"], old_env)
        name = f"{distinct}, before ({args.before})"
        got[name] = [child(cases[distinct], old_env, args.before_timeout) for _ in range(args.before_rounds)]
    plan = json.loads(subprocess.run(cases["fleet (2,000 nodes, 12 groups)"], env=env, capture_output=True,
                                     text=True).stdout)
    summary = {
        name: {"cpu_s_median": _rounded(statistics.median(c for c, _ in runs)),
               "wall_s_median": _rounded(statistics.median(w for _, w in runs)), "rounds": len(runs)}
        for name, runs in got.items()
    }
    record = {
        "what": "torchfit resolve --facts FLEET.json (generated) beside one host and a bare interpreter",
        "nodes": args.nodes, "groups": args.groups, "fleet_file_bytes": fleet.stat().st_size,
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "cases": summary,
        "plan": {k: plan.get(k) for k in ("torch", "variant", "hosts")},
        "binding_reasons": [r for r in plan.get("reasons", []) if " rules out " in r],
    }
    record["distinct_groups"] = args.distinct
    record["before_timeout_s"] = args.before_timeout if args.before else None
    for name, s in summary.items():
        cpu, wall = (float("inf") if v is None else v for v in (s["cpu_s_median"], s["wall_s_median"]))
        print(f"{name:<40} cpu {shown(cpu, args.before_timeout)}   wall {shown(wall, args.before_timeout)}"
              f"   ({s['rounds']} rounds)")
    print(f"plan: torch {plan.get('torch')} {plan.get('variant')} for {len(plan.get('hosts') or [])} groups")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


def _rounded(value: float) -> float | None:
    """A median for the JSON record: None when it is past the timeout."""
    return None if value == float("inf") else round(value, 3)


if __name__ == "__main__":
    main()

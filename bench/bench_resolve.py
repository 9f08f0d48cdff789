"""`torchfit resolve --json` wall time beside a bare interpreter start, side by side, alternating.

Target (issue 12): under 300 ms above `python -c pass` (the front-end work aims under 150 ms).

    python bench/bench_resolve.py                         # this checkout, 15 rounds
    python bench/bench_resolve.py --baseline 8fffd0c      # and the torchfit of that commit, same run
    python bench/bench_resolve.py -n 21 --json out.json

torchfit runs as a user gets it: each version `pip install`ed into a fresh venv (bytecode
compiled by pip, PYTHONDONTWRITEBYTECODE unset), run as `VENV/bin/torchfit`. The bare
anchor is `VENV/bin/python -c pass` of the same venv. Each round runs every case once,
in alternating order (ABC CBA ...), so drift in this machine's load falls on all.

Cases, for each torchfit:

- `resolve` (probes this host): `torchfit resolve torch==2.13.0 --variant cpu --python 3.11
  --json`, its start-up cache ($XDG_CACHE_HOME/torchfit) warm, as on every run but the first;
- `resolve, empty cache`: the same with an empty $XDG_CACHE_HOME every run (the first run
  after an install, an upgrade or a matrix edit);
- `resolve --facts FILE`: the same for a facts file (no probe: the resolver's own cost);
- `--version`: start-up alone.

`--phases` also times the phases inside one process (imports, parser, matrix, probe,
resolve) for each torchfit, as medians of fresh processes.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--json"]

# Runs inside the bench venv's interpreter: per-phase times of one `resolve`, no profiler.
PHASES = r"""
import json, sys, time
T = time.perf_counter
t0 = last = T()
out = {}
def lap(name):
    global last
    now = T(); out[name] = round((now - last) * 1000, 2); last = now
import torchfit.cli.options as options
import torchfit.cli.settings as settings

lap("import torchfit.cli")
argv = sys.argv[1:]
try:
    parser = options.build_parser(argv)
except TypeError:  # before the lazy parser: build_parser() took no argument
    parser = options.build_parser()
args = parser.parse_args(argv)
lap("build_parser + parse_args")
try:
    from torchfit.cache import load_matrix
except ImportError:
    from torchfit.compat.matrix import load_matrix
try:  # since the planning step (issue 24): what `resolve` runs
    from torchfit.compat.plan import plan_to_json
    from torchfit.planning import make_plan
except ImportError:
    from torchfit.compat.request import plan_to_json
    make_plan = None
from torchfit.compat.resolver import resolve
lap("import matrix, request, resolver")
matrix = load_matrix(args.matrix)
lap("load_matrix")
request = settings.make_request(args, matrix)
lap("make_request")
hosts = settings.load_hosts(args)
lap("load_hosts (host probe)")
if make_plan is not None:
    plan = make_plan(hosts, request, matrix, settings.plan_settings(args, request.project))
else:
    plan = resolve(hosts, request, matrix)
lap("resolve")
json.dumps(plan_to_json(plan), indent=2)
lap("JSON")
out["total in-process"] = round((T() - t0) * 1000, 2)
print(json.dumps(out))
"""


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["XDG_CACHE_HOME"] = str(cache)
    return env


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU (user + sys, the children it waited for included)
    is inflated less than wall time when other work shares the machine."""
    c0 = _cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()[-800:]}")
    return dt, _cpu() - c0


def install_torchfit(work: Path, name: str, source: Path) -> Path:
    """`python -m venv W/NAME && W/NAME/bin/pip install SOURCE`: torchfit as the README installs it."""
    venv = work / f"torchfit-{name}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # pip compiles bytecode
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(source)], check=True, env=env)
    return venv


def checkout(work: Path, rev: str) -> Path:
    dest = work / f"src-{rev}"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=15, help="rounds (default 15)")
    ap.add_argument("--baseline", metavar="REV", help="also time the torchfit of this git commit")
    ap.add_argument("--phases", action="store_true", help="also time the phases inside one process")
    ap.add_argument("--work", metavar="DIR", help="scratch directory (default: a temporary one)")
    ap.add_argument("--json", metavar="FILE", help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-resolve-", dir=args.work) as tmp:
        work = Path(tmp)
        print("== installing torchfit into fresh venvs (pip install .)", flush=True)
        tools = {"now": install_torchfit(work, "now", ROOT)}
        if args.baseline:
            tools[args.baseline] = install_torchfit(work, args.baseline, checkout(work, args.baseline))
        first = next(iter(tools.values()))
        facts = work / "facts.json"
        facts.write_text(subprocess.run([str(first / "bin" / "torchfit"), "detect", "--json"], capture_output=True,
                                        text=True, env=_env(work / "cache-detect"), check=True).stdout)
        bare_py = str(first / "bin" / "python")
        cases: dict[str, tuple[list[str], str]] = {"python -c pass": ([bare_py, "-c", "pass"], "warm")}
        for label, venv in tools.items():
            tf = str(venv / "bin" / "torchfit")
            cases[f"{label}: resolve"] = ([tf, "resolve", *ARGS], "warm")
            cases[f"{label}: resolve, empty cache"] = ([tf, "resolve", *ARGS], "empty")
            cases[f"{label}: resolve --facts FILE"] = ([tf, "resolve", *ARGS, "--facts", str(facts)], "warm")
            cases[f"{label}: --version"] = ([tf, "--version"], "warm")
        warm = {label: work / f"cache-{label}" for label in tools}

        def run(name: str) -> tuple[float, float]:
            argv, mode = cases[name]
            label = name.split(":")[0]
            if mode == "empty":
                cache = work / "cache-empty"
                shutil.rmtree(cache, ignore_errors=True)
                return _time(argv, _env(cache))
            return _time(argv, _env(warm.get(label, work / "cache-bare")))

        for name in cases:  # fill the page cache and the warm start-up caches; not timed
            run(name)
        times: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        names = list(cases)
        load0 = os.getloadavg()[0]
        for i in range(args.n):
            for name in names if i % 2 == 0 else names[::-1]:
                wall, cpu = run(name)
                times[name].append(wall)
                cpus[name].append(cpu)
        base = statistics.median(times["python -c pass"])
        base_cpu = statistics.median(cpus["python -c pass"])
        result: dict[str, Any] = {"rounds": args.n, "baseline": args.baseline,
                                  "date": time.strftime("%Y-%m-%d %H:%M"),
                                  "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)], "cases": {}}
        print(f"== medians of {args.n} alternating rounds (ms); load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")
        print(f"   {'':44s} {'wall':>13s}   {'above bare':>10s}   {'CPU':>6s}   {'above bare':>10s}")
        for name, ts in times.items():
            med = statistics.median(ts)
            cpu = statistics.median(cpus[name])
            result["cases"][name] = {"median_ms": round(med * 1000, 1), "above_bare_ms": round((med - base) * 1000, 1),
                                     "cpu_median_ms": round(cpu * 1000, 1),
                                     "cpu_above_bare_ms": round((cpu - base_cpu) * 1000, 1),
                                     "runs_ms": [round(t * 1000, 1) for t in ts]}
            print(f"   {name:44s} {med * 1000:13.1f}   {(med - base) * 1000:10.1f}   {cpu * 1000:6.1f}"
                  f"   {(cpu - base_cpu) * 1000:10.1f}")
        if args.phases:
            result["phases_ms"] = {}
            print("== phases inside one process, medians of fresh processes (ms)")
            for label, venv in tools.items():
                rows = []
                for _ in range(args.n):
                    out = subprocess.run([str(venv / "bin" / "python"), "-c", PHASES, "resolve", *ARGS],
                                         capture_output=True, text=True, env=_env(warm[label]), cwd=str(work))
                    if out.returncode != 0:
                        raise SystemExit(f"phases failed for {label}: {out.stderr[-800:]}")
                    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                med = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
                result["phases_ms"][label] = med
                print(f"   {label}: " + ", ".join(f"{k} {v}" for k, v in med.items()))
        print(json.dumps({k: v["above_bare_ms"] for k, v in result["cases"].items()}))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

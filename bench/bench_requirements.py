"""A 3,000-line requirements file through torchfit's own project steps, this checkout beside another.

Issue 25: project requirements cost O(n^2) (`compat/provider.project_spec` intersected every
line's specifier for every lookup: 9 M intersections for 3,000 lines) and duplicates were kept.
This times, in one fresh process per sample, what torchfit does with the file before uv sees
it: `-r FILE` read and parsed (`cli.load_project` through `make_request`), the resolver's
`Context` built, and `project_spec`/`extras_of` asked once per line, as the resolver and the
conflict explanation (compat/explain.py) ask them. No network, no uv: the cost is torchfit's.

    python bench/bench_requirements.py                    # this checkout, 7 rounds
    python bench/bench_requirements.py --baseline 06e855a # and that commit's src/, same run, alternating
    python bench/bench_requirements.py --lines 3000 -n 9 --json out.json

The file: `--lines` lines over 30 names, each line its own specifier (`pkg7!=0.1234`), and
every tenth line a duplicate of the line before (a requirements file merged from several).
Each round runs every src once, alternating order, so drift falls on both.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs under the src/ given by PYTHONPATH: prints the seconds of the project steps.
SNIPPET = r"""
import sys, time
from torchfit.cli.options import build_parser
from torchfit.cli.settings import load_hosts, make_request
from torchfit.cache import load_matrix
from torchfit.compat.provider import Context
argv = ["resolve", "--facts", sys.argv[1], "-r", sys.argv[2], "--variant", "cpu"]
args = build_parser(argv).parse_args(argv)
hosts = load_hosts(args)
matrix = load_matrix()
t0 = time.perf_counter()
request = make_request(args, matrix)
ctx = Context(hosts, request, matrix)
for r in ctx.project:
    ctx.project_spec(r.name)
    ctx.extras_of(r.name)
print(time.perf_counter() - t0, len(ctx.project))
"""


def write_file(path: Path, lines: int) -> None:
    out = []
    for i in range(lines):
        out.append(out[-1] if i % 10 == 9 else f"pkg{i % 30}!=0.{i}")
    path.write_text("\n".join(out) + "\n")


def sample(src: Path, facts: Path, reqs: Path, env: dict[str, str]) -> tuple[float, int]:
    proc = subprocess.run([sys.executable, "-c", SNIPPET, str(facts), str(reqs)], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(src)}, timeout=1800, check=False)
    if proc.returncode != 0:
        sys.exit(f"bench_requirements: {src}: {proc.stderr.strip()[-800:]}")
    seconds, kept = proc.stdout.split()
    return float(seconds), int(kept)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="COMMIT", help="also time this commit's src/ (git archive), same run")
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("-n", type=int, default=7, help="rounds")
    ap.add_argument("--json", type=Path, help="write the samples here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-req-") as tmp:
        work = Path(tmp)
        srcs = {"this checkout": ROOT / "src"}
        if args.baseline:
            dest = work / "baseline"
            dest.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "src"], capture_output=True,
                                     check=True, timeout=120).stdout
            subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, timeout=120)
            srcs[args.baseline] = dest / "src"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIT_", "PYTHON"))}
        env["XDG_CACHE_HOME"] = str(work / "cache")
        facts = work / "facts.json"
        detect = subprocess.run([sys.executable, "-m", "torchfit", "detect", "--json"], capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT / "src")},
                                timeout=300, check=True)
        facts.write_text(detect.stdout)
        reqs = work / "requirements.txt"
        write_file(reqs, args.lines)
        times: dict[str, list[float]] = {name: [] for name in srcs}
        kept: dict[str, int] = {}
        order = list(srcs.items())
        start = time.monotonic()
        for k in range(args.n):
            for name, src in order if k % 2 == 0 else order[::-1]:
                seconds, kept[name] = sample(src, facts, reqs, env)
                times[name].append(seconds)
        print(f"{args.lines}-line requirements file, {args.n} rounds ({time.monotonic() - start:.0f} s in all): "
              "parse + Context + project_spec per line")
        print(f"{'src':20} {'median s':>10} {'min s':>8} {'max s':>8} {'requirements kept':>18}")
        for name, got in times.items():
            print(f"{name:20} {statistics.median(got):>10.3f} {min(got):>8.3f} {max(got):>8.3f} {kept[name]:>18}")
        if args.json:
            args.json.write_text(json.dumps({"lines": args.lines, "samples": times, "kept": kept}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`torchfit install` beside bare uv, side by side, alternating, in one run.

    python bench/bench_install.py                          # CPU set, warm and cold, 5 runs each
    python bench/bench_install.py --baseline bcb96b6       # and the torchfit of that commit, same run
    python bench/bench_install.py --set cuda --runs 5      # CUDA set (~5.5 GB per env)
    python bench/bench_install.py --seed                   # pip in the env, for torchfit and the anchor
    python bench/bench_install.py --config user --cold-runs 0   # this machine's pip configuration, both sides
    python bench/bench_install.py --json out.json
    python bench/bench_install.py --config user --cold-runs 0 --anchor-imports   # anchor + its first import torch

torchfit runs as a user gets it: this checkout `pip install`ed into a fresh venv (its
bytecode compiled, uv beside its interpreter as a runtime dependency), then
`VENV/bin/torchfit install ... --json`. `--baseline REV` installs that commit the same
way (plus the `uv` wheel, which older commits had only as a test extra), so before and
after are measured in the same run, on the same load.

The anchor is the least the same result needs: `uv venv D` (`--seed` only when torchfit
seeds too) + `uv pip install --python D/bin/python -r pinned.txt` of the exact set
torchfit's lock holds, from the same indexes (the torch index, PyPI, /opt/pypi,
/opt/pypi-more, /opt/wheels; `--index-strategy unsafe-best-match`), with the same uv
binary. Runs alternate (torchfit, anchor, anchor, torchfit, ...) so drift in this
machine's load falls on both. Cold: a fresh, empty uv cache for every run of every tool;
warm: one cache filled by an unmeasured run of each.

Configurations (`--config`; every run prints which, and --json records it):

- bench (the default; the figures of bench/records/idle-2026-11-30): the anchor gets the
  sources above written out (PyPI, the torch index, /opt/pypi, /opt/pypi-more, /opt/wheels)
  and installs the exact pins of torchfit's lock; `--seed` only when given; torchfit runs
  in the caller's environment (so it also reads the caller's pip configuration);
- user: the user's own pip configuration applied to both sides. torchfit reads it itself
  (pip's files and PIP_* variables, as a user's torchfit does); for the anchor the bench
  reads the same configuration with `python -m pip config list` (files, then PIP_*
  variables over them) and gives it to uv as a user would: index-url as the default
  index, each extra-index-url and the torch index as an index, each find-links directory,
  trusted-host, no-index, constraint, cert (SSL_CERT_FILE) and timeout (UV_HTTP_TIMEOUT);
  `--index-strategy unsafe-best-match` (pip's rule, which torchfit applies too). The
  anchor is what the issue measured: `uv venv --seed --python PY D` + `uv pip install
  --python D/bin/python REQ` of the same requirement (`torch==2.13.0`: uv resolves it
  itself); `--seed` on both sides.

Sets (Python 3.11, this machine's local indexes):

- cpu:  torch 2.13.0 CPU from a PEP 503 tree over /opt/wheels' wheel (`--variant cpu`);
- cuda: torch 2.14.1 (CUDA 13.0) and its nvidia-* wheels from file:///opt/pypi-more/simple
        (`--variant cu130 --assume gpu=sm_90 --assume driver=580.159.04`).

Printed: medians of the wall times, each tool over the anchor (the ratio of the medians,
and the median of each round's own ratio), and the median time of
each of torchfit's steps (its --json timings). "front+tail" is the wall time minus the
sum of the steps: interpreter start, imports, host probe, matrix, resolution, summary,
exit. In the uv flow `uv venv` and then install-early (uv's cached answer, installed while
the resolution waits on the network) run beside `resolve`, so the steps' wall time is
max(resolve, venv + install-early) plus the other steps.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = "3.11"
CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
CUDA_INDEX = "file:///opt/pypi-more/simple"
LOCAL_INDEXES = ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]
FIND_LINKS = ["/opt/wheels"]


def _python() -> str:
    found = shutil.which(f"python{PY}")
    out = subprocess.run([found or "python3", "-c", "import sys; print(sys.executable)"], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def _cpu_index(work: Path) -> str:
    digest = hashlib.sha256(CPU_WHEEL.read_bytes()).hexdigest()
    page = work / "simple" / "torch"
    page.mkdir(parents=True, exist_ok=True)
    href = f"{CPU_WHEEL.parent.as_uri()}/{CPU_WHEEL.name.replace('+', '%2B')}#sha256={digest}"
    (page / "index.html").write_text(f'<html><body><a href="{href}">{CPU_WHEEL.name}</a></body></html>\n')
    (work / "simple" / "index.html").write_text('<html><body><a href="torch/">torch</a></body></html>\n')
    return (work / "simple").as_uri()


def _sets(work: Path) -> dict[str, dict[str, Any]]:
    return {
        "cpu": {"index": _cpu_index(work) if CPU_WHEEL.exists() else None,
                "args": ["torch==2.13.0", "--variant", "cpu", "--python", PY]},
        "cuda": {"index": CUDA_INDEX,
                 "args": ["torch==2.14.1", "--variant", "cu130", "--assume", "gpu=sm_90",
                          "--assume", "driver=580.159.04", "--python", PY]},
    }


def pip_configuration(python: str) -> dict[str, str]:
    """The pip configuration `python -m pip` would use: `pip config list`, PIP_* variables over the files.

    pip's order: the files' [global] then [install] keys, then the environment.
    """
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True).stdout
    ranked: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        where, _, value = line.partition("=")
        section, _, key = where.rpartition(".")
        rank = {"global": 0, "install": 1, ":env:": 2}.get(section)
        if rank is None or not key:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        if key not in ranked or rank >= ranked[key][0]:
            ranked[key] = (rank, value)
    return {k: v for k, (_, v) in sorted(ranked.items())}


def uv_sources(config: dict[str, str], torch_index: str) -> tuple[list[str], dict[str, str]]:
    """The uv options and environment that give uv the same sources and settings as `config`."""
    args = ["--index-strategy", "unsafe-best-match", "--index", torch_index]
    env: dict[str, str] = {}
    if config.get("index-url"):
        args += ["--default-index", config["index-url"]]
    for url in config.get("extra-index-url", "").split():
        args += ["--index", url]
    for link in config.get("find-links", "").split():
        args += ["--find-links", link]
    for host in config.get("trusted-host", "").split():
        args += ["--allow-insecure-host", host]
    for path in config.get("constraint", "").split():
        args += ["-c", path]
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    if config.get("cert"):
        env["SSL_CERT_FILE"] = config["cert"]
    timeout = config.get("timeout") or config.get("default-timeout")
    if timeout:
        env["UV_HTTP_TIMEOUT"] = timeout.split(".")[0]
    return args, env


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(cwd or ROOT))
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return seconds, proc


def install_torchfit(work: Path, name: str, source: Path, extra: list[str]) -> Path:
    """`python -m venv W/NAME && W/NAME/bin/pip install SOURCE`: torchfit as the README installs it."""
    venv = work / f"torchfit-{name}"
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # pip compiles bytecode, as for any user
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(source), *extra], env)
    return venv


def checkout(work: Path, rev: str) -> Path:
    dest = work / f"src-{rev}"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


class Bench:
    def __init__(self, work: Path, name: str, spec: dict[str, Any], tools: dict[str, Path], seed: bool,
                 config: str = "bench", anchor_imports: bool = False) -> None:
        self.work = work
        self.anchor_imports = anchor_imports
        self.name = name
        self.spec = spec
        self.tools = tools  # label -> torchfit venv
        self.config = config
        self.seed = seed or config == "user"
        self.python = _python()
        self.pip_config = pip_configuration(self.python) if config == "user" else None
        self.uv = str(next(iter(tools.values())) / "bin" / "uv")
        self.base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        self.base_env["XDG_STATE_HOME"] = str(work / "state")
        self.pinned: Path | None = None
        self.warm_cache = work / f"uv-cache-warm-{name}"

    def _env(self, cold: bool) -> dict[str, str]:
        env = dict(self.base_env)
        env["UV_CACHE_DIR"] = str(Path(tempfile.mkdtemp(prefix="cache-", dir=self.work)) if cold else self.warm_cache)
        return env

    def _dest(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="env-", dir=self.work)) / "env"

    def _cleanup(self, dest: Path, env: dict[str, str], cold: bool) -> None:
        shutil.rmtree(dest.parent, ignore_errors=True)
        if cold:
            shutil.rmtree(env["UV_CACHE_DIR"], ignore_errors=True)

    def torchfit(self, label: str, cold: bool) -> dict[str, Any]:
        env, dest = self._env(cold), self._dest()
        argv = [str(self.tools[label] / "bin" / "torchfit"), "install", *self.spec["args"], "--torch-index-url",
                self.spec["index"], "--prefix", str(dest), "--json", *(["--seed"] if self.seed else [])]
        seconds, proc = _run(argv, env)
        out = json.loads(proc.stdout)
        if self.pinned is None:
            self.pinned = self.work / f"pinned-{self.name}.txt"
            self.pinned.write_text("".join(f"{p['name']}=={p['version']}\n" for p in out["packages"]))
        self._cleanup(dest, env, cold)
        timings = dict(out["timings"])
        timings["front+tail"] = seconds - _steps_wall(timings)
        return {"seconds": seconds, "timings": timings, "installer": out["installer"],
                "backend_line": next((ln for ln in proc.stderr.splitlines() if "installer:" in ln), None)}

    def anchor_install_args(self) -> tuple[list[str], dict[str, str]]:
        """`uv pip install`'s sources and what it installs, and the environment it adds, in this configuration."""
        if self.pip_config is not None:
            args, extra_env = uv_sources(self.pip_config, self.spec["index"])
            return [*args, self.spec["args"][0]], extra_env
        sources = ["--index-strategy", "unsafe-best-match", "--default-index", "https://pypi.org/simple",
                   "--index", self.spec["index"]]
        for url in LOCAL_INDEXES:
            sources += ["--index", url]
        for link in FIND_LINKS:
            sources += ["--find-links", link]
        # the exact set torchfit's first (unmeasured) run installed
        return [*sources, "-r", str(self.pinned or f"pinned-{self.name}.txt")], {}

    def describe(self) -> list[str]:
        """What this configuration gives each side (printed, and kept in --json)."""
        install, extra_env = self.anchor_install_args()
        seed = ["--seed"] if self.seed else []
        lines = [f"configuration: {self.config}"]
        if self.pip_config is not None:
            lines.append("pip configuration (pip config list, PIP_* over files): "
                         + ", ".join(f"{k}={v}" for k, v in self.pip_config.items()))
        lines.append("torchfit: torchfit install " + " ".join([*self.spec["args"], "--torch-index-url",
                                                            self.spec["index"], *seed])
                     + " (its environment: the caller's, pip configuration included)")
        lines.append("anchor:   " + " ".join(["uv", "venv", *seed, "--python", self.python, "D"]))
        lines.append("anchor:   " + " ".join([*(f"{k}={v}" for k, v in extra_env.items()), "uv", "pip", "install",
                                             "--python", "D/bin/python", *install]))
        if self.anchor_imports:
            lines.append("anchor:   D/bin/python -W ignore -c 'import torch'  (its first import, timed with it)")
        return lines

    def anchor(self, cold: bool, check: bool = False) -> dict[str, Any]:
        """`check`: also compare the env's packages with torchfit's (unmeasured; SystemExit when they differ)."""
        env, dest = self._env(cold), self._dest()
        install, extra_env = self.anchor_install_args()
        env.update(extra_env)
        start = time.monotonic()
        _run([self.uv, "venv", "-q", *(["--seed"] if self.seed else []), "--python", self.python, str(dest)], env)
        _run([self.uv, "pip", "install", "-q", "--python", str(dest / "bin" / "python"), *install], env)
        if self.anchor_imports:  # the anchor's user's first `import torch` (it compiles the bytecode)
            _run([str(dest / "bin" / "python"), "-W", "ignore", "-c", "import torch"], env)
        seconds = time.monotonic() - start
        if check:
            _, proc = _run([self.uv, "pip", "freeze", "--python", str(dest / "bin" / "python")], env)
            got = {ln.split("==")[0].lower(): ln for ln in proc.stdout.split() if "==" in ln}
            assert self.pinned is not None
            want = {ln.split("==")[0].lower(): ln for ln in self.pinned.read_text().split()}
            differ = sorted(ln for name, ln in want.items() if got.get(name) != ln)
            if differ:
                raise SystemExit(f"the anchor installed another set than torchfit: {differ} vs {sorted(got.values())}")
        self._cleanup(dest, env, cold)
        return {"seconds": seconds}


def _steps_wall(timings: dict[str, float]) -> float:
    """The wall time torchfit's steps take. In the uv flow (a single `install` step) `uv venv`
    and then `install-early` run beside `resolve`: they count as max(resolve, venv + install-early)."""
    if "install" not in timings:
        return sum(timings.values())
    beside = ("resolve", "venv", "install-early")
    rest = sum(v for k, v in timings.items() if k not in beside)
    return rest + max(timings.get("resolve", 0.0), timings.get("venv", 0.0) + timings.get("install-early", 0.0))


def _median(rows: list[dict[str, Any]]) -> float:
    return statistics.median(r["seconds"] for r in rows)


def run_set(bench: Bench, runs: int, cold_runs: int) -> dict[str, Any]:
    labels = [*bench.tools, "anchor"]
    for line in bench.describe():
        print(f"   {line}", flush=True)
    print(f"== {bench.name}: warming the cache (unmeasured)", flush=True)
    first = bench.torchfit(labels[0], cold=False)
    print(f"   {first['backend_line']}", flush=True)
    for label in labels[1:-1]:
        bench.torchfit(label, cold=False)
    bench.anchor(cold=False, check=True)
    print(f"   pinned set (the anchor's env holds it too): {bench.pinned.read_text().split()}", flush=True)  # type: ignore[union-attr]
    loads = [os.getloadavg()[0]]
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {label: {} for label in labels}
    for mode, n in (("warm", runs), ("cold", cold_runs)):
        for i in range(n):
            order = labels if i % 2 == 0 else labels[::-1]  # ABC CBA ABC ...
            for label in order:
                r = bench.anchor(mode == "cold") if label == "anchor" else bench.torchfit(label, mode == "cold")
                rows[label].setdefault(mode, []).append(r)
                loads.append(os.getloadavg()[0])
                print(f"   {mode} #{i + 1} {label:10s} {r['seconds']:6.2f} s   (load {loads[-1]:.2f})", flush=True)
    summary: dict[str, Any] = {}
    for mode in ("warm", "cold"):
        if not rows["anchor"].get(mode):
            continue
        base = _median(rows["anchor"][mode])
        summary[mode] = {"anchor_s": round(base, 3)}
        for label in bench.tools:
            med = _median(rows[label][mode])
            steps: dict[str, list[float]] = {}
            for r in rows[label][mode]:
                for k, v in r["timings"].items():
                    steps.setdefault(k, []).append(v)
            # each round runs every tool back to back: the median of the rounds' own ratios
            # is steadier than a ratio of medians when the load swings between rounds
            paired = statistics.median(r["seconds"] / a["seconds"] for r, a in zip(rows[label][mode], rows["anchor"][mode]))
            summary[mode][label] = {"median_s": round(med, 3), "over_anchor": round(med / base, 3),
                                    "paired_over_anchor": round(paired, 3),
                                    "minus_anchor_s": round(med - base, 3),
                                    "steps_median_s": {k: round(statistics.median(v), 3) for k, v in steps.items()}}
    print(f"== {bench.name} ({bench.config} configuration): medians, alternating runs (warm {runs}, cold {cold_runs}); "
          f"1-min load average {min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}")
    for mode, s in summary.items():
        print(f"   {mode}: anchor (uv venv + uv pip install) {s['anchor_s']:.2f} s")
        for label in bench.tools:
            t = s[label]
            print(f"   {mode}: torchfit {label:9s} {t['median_s']:.2f} s = {t['over_anchor']:.2f}x anchor "
                  f"({t['minus_anchor_s']:+.2f} s; median of the rounds' ratios {t['paired_over_anchor']:.2f}x)")
            print("          steps: " + ", ".join(f"{k} {v:.2f}" for k, v in t["steps_median_s"].items()))
    return {"configuration": bench.config, "describe": bench.describe(), "pip_config": bench.pip_config,
            "load_average": {"min": min(loads), "max": max(loads), "median": statistics.median(loads)},
            "summary": summary, "runs": rows, "pinned": bench.pinned.read_text().split()}  # type: ignore[union-attr]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("cpu", "cuda", "both"), default="cpu")
    ap.add_argument("--runs", type=int, default=5, help="warm runs per tool (default 5)")
    ap.add_argument("--cold-runs", type=int, default=5, help="cold runs per tool (default 5)")
    ap.add_argument("--baseline", metavar="REV", help="also time the torchfit of this git commit")
    ap.add_argument("--seed", action="store_true", help="pip in the env: torchfit --seed, uv venv --seed")
    ap.add_argument("--config", choices=("bench", "user"), default="bench",
                    help="bench: the sources written out (default); user: this machine's pip configuration "
                         "on both sides, --seed, the anchor resolves the requirement itself")
    ap.add_argument("--anchor-imports", action="store_true",
                    help="the anchor also imports torch once in its env, as torchfit's build check does in its "
                         "own (the anchor's user pays that first import, bytecode compilation included, later)")
    ap.add_argument("--work", metavar="DIR", help="scratch directory (default: a temporary one)")
    ap.add_argument("--json", metavar="FILE", help="write the raw figures here")
    args = ap.parse_args()
    results: dict[str, Any] = {"seed": args.seed or args.config == "user", "config": args.config,
                               "anchor_imports": args.anchor_imports,
                               "baseline": args.baseline, "date": time.strftime("%Y-%m-%d %H:%M")}
    with tempfile.TemporaryDirectory(prefix="bench-install-", dir=args.work) as tmp:
        work = Path(tmp)
        print("== installing torchfit into fresh venvs (pip install .)", flush=True)
        tools = {"now": install_torchfit(work, "now", ROOT, [])}
        if args.baseline:
            tools[args.baseline] = install_torchfit(work, args.baseline, checkout(work, args.baseline), ["uv"])
        sets = _sets(work)
        for name in (["cpu", "cuda"] if args.set == "both" else [args.set]):
            spec = sets[name]
            if not spec["index"]:
                print(f"{name}: its wheels are not on this machine; skipped")
                continue
            results[name] = run_set(Bench(work, name, spec, tools, args.seed, args.config, args.anchor_imports),
                                    args.runs, args.cold_runs)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

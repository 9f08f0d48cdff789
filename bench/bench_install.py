"""Benchmark `torchfit install` against bare uv and bare pip: same pinned set, same indexes.

    python bench/bench_install.py                       # CPU set: torchfit, uv, pip; cold and warm
    python bench/bench_install.py --set cuda --runs 3   # CUDA set (~5.5 GB per env): torchfit, uv
    python bench/bench_install.py --json out.json

Sets (both Python 3.11, this machine's local indexes):

- cpu:  torch 2.13.0 CPU from a PEP 503 tree made over /opt/wheels' wheel
        (`--torch-index-url file://...`, `--variant cpu`);
- cuda: PyPI's torch 2.14.1 (CUDA 13.0) from file:///opt/pypi-more/simple
        (`--variant cu130 --assume gpu=sm_90 --assume driver=580.159.04`).

The pinned set is what torchfit's own lock holds (every package at its exact version,
torch with its local label); the bare runs install that set:

- uv:  `uv venv --python PY D` + `uv pip install --python D/bin/python -r pinned.txt`
       with PyPI as the default index and the torch index, /opt/pypi, /opt/pypi-more and
       /opt/wheels as extra sources (`--index-strategy unsafe-best-match`);
- pip: `python -m venv D` + `D/bin/pip install -r pinned.txt --extra-index-url TORCH_INDEX`
       (pip's configuration supplies the rest, as it does for torchfit);
- torchfit: `python -m torchfit install ... --prefix D --json` (uv, the default), and
       `torchfit install --lock` of its lock (warm only).

Cold: a fresh, empty uv/pip cache for every run; warm: a cache filled by one unmeasured
run. Medians of several runs. torchfit's fixed overhead is reported two ways: its wall
time minus bare uv's (warm), and its wall time minus the time its own package-install
steps took (what remains: start-up, resolve, venv, the compiles, the build check, the
lock, the swap).

Measured on the 2-core build machine, 2026-11-30 (medians; uv 0.13.9, pip 23.2.1):

    set   tool             cold     warm
    cpu   torchfit         7.16 s   1.48 s   (lock reinstall, warm: 1.33 s)
    cpu   bare uv          4.93 s   0.71 s
    cpu   bare pip        29.80 s  30.75 s
    cuda  torchfit        16.72 s   1.61 s   (lock reinstall, warm: 1.31 s)
    cuda  bare uv         16.23 s   0.80 s   (two warm runs of five took 5.6 s)

torchfit's fixed overhead on the CPU set, warm: 0.78 s over bare uv; 0.91 s of its own
wall time is not package installation (start-up and resolve, venv with pip seeded,
the uv compile, the build check, the lock). CUDA set: 1.03x bare uv cold, +0.81 s warm.
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


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(ROOT))
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return seconds, proc


class Bench:
    def __init__(self, work: Path, name: str, spec: dict[str, Any]) -> None:
        self.work = work
        self.name = name
        self.spec = spec
        self.python = _python()
        self.uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        self.base_env = dict(os.environ)
        self.base_env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + self.base_env.get("PYTHONPATH", "")
        self.base_env["XDG_STATE_HOME"] = str(work / "state")
        self.warm_uv = work / "uv-cache-warm"
        self.warm_pip = work / "pip-cache-warm"
        self.lock: Path | None = None
        self.pinned: Path | None = None

    def _env(self, cold: bool) -> dict[str, str]:
        env = dict(self.base_env)
        if cold:
            fresh = Path(tempfile.mkdtemp(prefix="cache-", dir=self.work))
            env["UV_CACHE_DIR"] = str(fresh / "uv")
            env["PIP_CACHE_DIR"] = str(fresh / "pip")
        else:
            env["UV_CACHE_DIR"] = str(self.warm_uv)
            env["PIP_CACHE_DIR"] = str(self.warm_pip)
        return env

    def _dest(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="env-", dir=self.work)) / "env"

    def _cleanup(self, dest: Path, env: dict[str, str], cold: bool) -> None:
        shutil.rmtree(dest.parent, ignore_errors=True)
        if cold:
            shutil.rmtree(Path(env["UV_CACHE_DIR"]).parent, ignore_errors=True)

    # -- the tools ------------------------------------------------------------------------------
    def torchfit(self, cold: bool) -> dict[str, Any]:
        env, dest = self._env(cold), self._dest()
        argv = [sys.executable, "-m", "torchfit", "install", *self.spec["args"], "--torch-index-url",
                self.spec["index"], "--prefix", str(dest), "--json"]
        seconds, proc = _run(argv, env)
        out = json.loads(proc.stdout)
        if self.lock is None:
            self.lock = self.work / f"pylock.{self.name}.toml"
            shutil.copy(dest / "pylock.toml", self.lock)
            self.pinned = self.work / f"pinned-{self.name}.txt"
            self.pinned.write_text("".join(f"{p['name']}=={p['version']}\n" for p in out["packages"]))
        self._cleanup(dest, env, cold)
        timings = out["timings"]
        installs = sum(v for k, v in timings.items() if k.startswith("install-"))
        return {"seconds": seconds, "overhead": seconds - installs, "timings": timings}

    def torchfit_lock(self, cold: bool) -> dict[str, Any]:
        env, dest = self._env(cold), self._dest()
        args = self.spec["args"]
        assume = [a for i, a in enumerate(args) if a == "--assume" or (i and args[i - 1] == "--assume")]
        seconds, _ = _run([sys.executable, "-m", "torchfit", "install", "--lock", str(self.lock), *assume,
                           "--prefix", str(dest), "--json"], env)
        self._cleanup(dest, env, cold)
        return {"seconds": seconds}

    def uv_bare(self, cold: bool) -> dict[str, Any]:
        env, dest = self._env(cold), self._dest()
        start = time.monotonic()
        _run([self.uv, "venv", "-q", "--python", self.python, str(dest)], env)
        sources = ["--default-index", "https://pypi.org/simple", "--index", self.spec["index"]]
        for url in LOCAL_INDEXES:
            sources += ["--index", url]
        for link in FIND_LINKS:
            sources += ["--find-links", link]
        _run([self.uv, "pip", "install", "-q", "--python", str(dest / "bin" / "python"), "--index-strategy",
              "unsafe-best-match", *sources, "-r", str(self.pinned)], env)
        seconds = time.monotonic() - start
        self._cleanup(dest, env, cold)
        return {"seconds": seconds}

    def pip_bare(self, cold: bool) -> dict[str, Any]:
        env, dest = self._env(cold), self._dest()
        start = time.monotonic()
        _run([self.python, "-m", "venv", str(dest)], env)
        _run([str(dest / "bin" / "pip"), "install", "-q", "--extra-index-url", self.spec["index"], "-r",
              str(self.pinned)], env)
        seconds = time.monotonic() - start
        self._cleanup(dest, env, cold)
        return {"seconds": seconds}


def _median(rows: list[dict[str, Any]], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("cpu", "cuda", "both"), default="cpu")
    ap.add_argument("--runs", type=int, default=5, help="warm runs per tool (default 5)")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold runs per tool (default 3)")
    ap.add_argument("--tools", default="", help="comma list of torchfit,uv,pip,lock (default: all for cpu; "
                                                "torchfit,uv,lock for cuda)")
    ap.add_argument("--json", metavar="FILE", help="write the raw figures here")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        work = Path(tmp)
        sets = _sets(work)
        for name in (["cpu", "cuda"] if args.set == "both" else [args.set]):
            spec = sets[name]
            if not spec["index"]:
                print(f"{name}: its wheels are not on this machine; skipped")
                continue
            tools = [t for t in (args.tools or ("torchfit,uv,pip,lock" if name == "cpu" else "torchfit,uv,lock"))
                     .split(",") if t]
            bench = Bench(work, name, spec)
            print(f"== {name}: warming the caches (unmeasured)", flush=True)
            bench.torchfit(cold=False)  # also writes the lock and the pinned set
            if "uv" in tools:
                bench.uv_bare(cold=False)
            if "pip" in tools:
                bench.pip_bare(cold=False)
            print(f"   pinned set: {bench.pinned.read_text().split()}", flush=True)  # type: ignore[union-attr]
            fns = {"torchfit": bench.torchfit, "uv": bench.uv_bare, "pip": bench.pip_bare,
                   "lock": bench.torchfit_lock}
            rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for tool in tools:
                for mode, n in (("cold", args.cold_runs), ("warm", args.runs)):
                    if tool == "lock" and mode == "cold":
                        continue
                    for i in range(n):
                        r = fns[tool](cold=(mode == "cold"))
                        rows.setdefault(tool, {}).setdefault(mode, []).append(r)
                        print(f"   {tool:9s} {mode} #{i + 1}: {r['seconds']:.2f} s", flush=True)
            summary: dict[str, Any] = {t: {m: round(_median(v), 2) for m, v in modes.items()}
                                       for t, modes in rows.items()}
            if "torchfit" in rows:
                for mode in ("cold", "warm"):
                    if mode in rows["torchfit"]:
                        summary.setdefault("torchfit_overhead_beyond_installs", {})[mode] = round(
                            _median(rows["torchfit"][mode], "overhead"), 2)
                        if "uv" in rows and mode in rows["uv"]:
                            summary.setdefault("torchfit_minus_uv", {})[mode] = round(
                                _median(rows["torchfit"][mode]) - _median(rows["uv"][mode]), 2)
                            summary.setdefault("torchfit_over_uv", {})[mode] = round(
                                _median(rows["torchfit"][mode]) / _median(rows["uv"][mode]), 3)
                steps: dict[str, list[float]] = {}
                for r in rows["torchfit"].get("warm", []):
                    for k, v in r["timings"].items():
                        steps.setdefault(k, []).append(v)
                summary["torchfit_warm_steps"] = {k: round(statistics.median(v), 3) for k, v in steps.items()}
            results[name] = {"summary": summary, "runs": rows}
            print(f"== {name} medians (s):")
            for key, val in summary.items():
                print(f"   {key}: {val}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

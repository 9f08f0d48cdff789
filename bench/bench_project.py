"""Project resolve against bare `uv pip compile` of the same requirements (issues 18, 24).

Both sides resolve the same project against the same local indexes on 127.0.0.1 (real
HTTP, warm caches), side by side in alternating rounds, medians reported:

- torchfit: `torchfit resolve --json -r requirements.txt` for a CPU host (since issue 24: the
  builds that fit, then one `uv pip compile` of the whole project with torch limited to them:
  uv finds the torch the project allows);
- bare uv: `uv pip compile` of the same requirements with the torch pin given
  (`torch==X` from the torch index), what a user would run knowing the answer.

    python bench/bench_project.py --rounds 7            # local indexes (tiny wheels)
    python bench/bench_project.py --rounds 7 --pypi     # real PyPI, a real project
    python bench/bench_project.py --rounds 7 --base ../base   # and torchfit from another checkout's src/
                                                              # (an earlier commit), in the same rounds

Every command runs in the project's directory (a temporary one), as a user runs them: not in
this checkout, whose .venv uv would find and take as its interpreter without searching PATH
(before issue 37's change every `uv pip compile` searched: through pyenv's shims, 43 programs).

Wall time and CPU time (user + sys of the command and every process it waited for, uv's
included): on a shared machine CPU time is inflated far less by others' load than wall time.

`--pypi`: the project `transformers==4.56.1 accelerate xformers==0.0.32.post2 sentencepiece`
resolved against pypi.org (the machine reaches PyPI; warm caches), the torch family taken
from PyPI too (download.pytorch.org is out of reach here), torch==2.8.0 given to bare uv
(xformers 0.0.32.post2 pins it: what torchfit finds by itself).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.wheels import make_wheel, serve_dir, write_index

PYPI_PROJECT = "transformers==4.56.1\naccelerate\nxformers==0.0.32.post2\nsentencepiece\n"


def build(root: Path) -> None:
    wheels = root / "w"
    project = []
    for i in range(20):  # a project of 20 packages, a few of them pinning torch
        deps = [f"dep{i}-a>=1", f"dep{i}-b"] + (["torch==2.8.0"] if i % 5 == 0 else [])
        project.append(make_wheel(wheels, f"pkg{i}", "1.0", deps))
        project += [make_wheel(wheels, f"dep{i}-a", v) for v in ("1.0", "1.1", "2.0")]
        project.append(make_wheel(wheels, f"dep{i}-b", "0.5"))
    write_index(root / "pypi", project)
    write_index(root / "torch" / "cpu", [make_wheel(root / "tw", "torch", "2.8.0+cpu")])
    (root / "requirements.txt").write_text("".join(f"pkg{i}\n" for i in range(20)))


def _children_cpu() -> float:
    """User + sys seconds of the children waited for so far (the command's own children too)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# pypi.org serves torch unlabelled, as CUDA builds (2.8.0 pins the CUDA 12.8 runtime): the host
# must run cu128, or the plan is refused (planning: an unlabelled CUDA torch on a GPU-less host).
HOST_PYPI = ("--assume", "gpu=sm_90", "--assume", "driver=570.124.06", "--assume", "glibc=2.36",
             "--assume", "arch=x86_64")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pypi", action="store_true", help="a real project against pypi.org")
    ap.add_argument("--base", help="a checkout of another commit: its torchfit (src/) timed beside this one")
    args = ap.parse_args()
    bindir = Path(sys.executable).parent
    uv = str(bindir / "uv")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root)
        if args.pypi:
            (root / "requirements.txt").write_text(PYPI_PROJECT)
        with serve_dir(root) as url:
            pypi = "https://pypi.org/simple" if args.pypi else f"{url}/pypi/simple"
            torch_index = "https://pypi.org/simple" if args.pypi else url + "/torch/{variant}/simple"
            # The same configuration on both sides: none (no pip.conf, no PIP_* variables).
            # without PYTHONDONTWRITEBYTECODE: bytecode written once, as pip writes it at install
            env = {**{k: v for k, v in os.environ.items()
                      if not k.startswith(("PIP_", "UV_")) and k != "PYTHONDONTWRITEBYTECODE"},
                   "PIP_CONFIG_FILE": "/dev/null", "XDG_CACHE_HOME": str(root / "cache"),
                   "UV_CACHE_DIR": str(root / "uvcache")}
            req = str(root / "requirements.txt")
            tf = [str(bindir / "torchfit"), "resolve", "--json", "-r", req, "--index-url", pypi,
                  "--torch-index-url", torch_index, "--allow-insecure-index",
                  "--assume", "python=3.11", *(HOST_PYPI if args.pypi else ("--assume", "gpu=none"))]
            pyproject = root / "bare" / "pyproject.toml"
            pyproject.parent.mkdir()
            deps = [line.strip() for line in (root / "requirements.txt").read_text().splitlines() if line.strip()]
            pyproject.write_text(
                '[project]\nname = "bare"\nversion = "0"\ndependencies = ['
                + ", ".join(f'"{d}"' for d in deps) + ', "torch==2.8.0"]\n'
                '[tool.uv.sources]\ntorch = { index = "torch" }\n'
                f'[[tool.uv.index]]\nname = "torch"\nurl = "{torch_index.replace("{variant}", "cpu")}"\n'
                'explicit = true\n')
            bare = [uv, "pip", "compile", str(pyproject), "--format", "pylock.toml", "-o", str(root / "bare" / "pylock.toml"),
                    "--no-config", "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
                    "--default-index", pypi, "--no-header", "--quiet"]
            runs: list[tuple[str, list[str], dict[str, str]]] = [("torchfit", tf, env), ("bare uv", bare, env)]
            if args.base:  # the same command, torchfit imported from the other checkout's src/
                base_env = {**env, "PYTHONPATH": str(Path(args.base).resolve() / "src")}
                runs.append(("base", [sys.executable, "-m", "torchfit", *tf[1:]], base_env))
            load0 = os.getloadavg()[0]
            times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
            cpus: dict[str, list[float]] = {name: [] for name, _, _ in runs}
            for _, argv, e in runs:  # warm every cache once
                subprocess.run(argv, env=e, check=True, capture_output=True, cwd=root)
            for i in range(args.rounds):
                for name, argv, e in (runs if i % 2 == 0 else runs[::-1]):  # ABC CBA ...
                    cpu = _children_cpu()
                    start = time.perf_counter()
                    subprocess.run(argv, env=e, check=True, capture_output=True, cwd=root)
                    times[name].append(time.perf_counter() - start)
                    cpus[name].append(_children_cpu() - cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    load = os.getloadavg()[0]
    print(f"{'pypi.org, ' + PYPI_PROJECT.replace(chr(10), ' ') if args.pypi else 'local indexes, 20 packages'}; "
          f"rounds {args.rounds} (alternating order), load average {load0:.2f} -> {load:.2f}")
    for k, v in times.items():
        print(f"{k:9s} median {med[k]:.3f} s  ({', '.join(f'{x:.3f}' for x in v)})")
    cmed = {k: statistics.median(v) for k, v in cpus.items()}
    for k, v in cpus.items():
        print(f"{k:9s} CPU median {cmed[k]:.3f} s  ({', '.join(f'{x:.3f}' for x in v)})")
    print(f"CPU ratio torchfit / bare uv: {cmed['torchfit'] / cmed['bare uv']:.2f}x"
          + (f"; base / bare uv: {cmed['base'] / cmed['bare uv']:.2f}x" if "base" in cmed else ""))
    print(f"ratio torchfit / bare uv: {med['torchfit'] / med['bare uv']:.2f}x")
    if "base" in med:
        print(f"ratio base / bare uv: {med['base'] / med['bare uv']:.2f}x; torchfit / base: "
              f"{med['torchfit'] / med['base']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

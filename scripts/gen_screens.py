"""Write docs/screens/*.txt: torchfit's output at 80 columns, as a user sees it.

    python scripts/gen_screens.py --cpu-env PREFIX

PREFIX is an env made by `torchfit install` (CPU torch 2.13.0 here) for the doctor
screens. GPUs are faked with an `nvidia-smi` on PATH (tests do the same): 2x A100
on driver 535 for `resolve --explain`, 8x H100 on driver 418 for a conflict, and
the NVML mismatch after a driver upgrade for the broken doctor run. Each file
starts with the command that made it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCREENS = ROOT / "docs" / "screens"
sys.path.insert(0, str(ROOT))  # the fake nvidia-smi scripts live with the tests' (one copy)
from tests.support.fake_smi import EIGHT_H100, NVML_MISMATCH, install_fake_smi

A100 = """#!/bin/sh
case "$*" in
  *--query-gpu=*)
    printf '0, NVIDIA A100-SXM4-80GB, 8.0, 81920, GPU-0a1b, 00000000:07:00.0, 535.183.01\\n'
    printf '1, NVIDIA A100-SXM4-80GB, 8.0, 81920, GPU-1c2d, 00000000:0F:00.0, 535.183.01\\n' ;;
  *topo*) printf '\\tGPU0\\tGPU1\\tCPU Affinity\\nGPU0\\t X \\tNV12\\t0-63\\nGPU1\\tNV12\\t X \\t0-63\\n' ;;
  *) exit 3 ;;
esac
"""


def smi_dir(tmp: Path, name: str, script: str) -> str:
    return str(install_fake_smi(tmp / name, script))


def shot(name: str, shown: str, argv: list[str], path_prefix: str | None = None) -> None:
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT / "src"))
    if path_prefix:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env['PATH']}"
    proc = subprocess.run([sys.executable, "-m", "torchfit", *argv], capture_output=True, text=True, env=env,
                          timeout=600)
    text = f"$ {shown}\n{proc.stdout}{proc.stderr}(exit {proc.returncode})\n"
    SCREENS.mkdir(parents=True, exist_ok=True)
    (SCREENS / name).write_text(text)
    widest = max(len(line) for line in text.splitlines()[1:])
    print(f"{name}: exit {proc.returncode}, widest line {widest}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-env", required=True, help="an env made by torchfit install (for doctor)")
    args = ap.parse_args()
    env = os.path.abspath(args.cpu_env)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        a100, h100, nvml = smi_dir(tmp, "a100", A100), smi_dir(tmp, "h100x8", EIGHT_H100), smi_dir(tmp, "nvml", NVML_MISMATCH)
        shot("matrix-show.txt", "COLUMNS=80 torchfit matrix show --torch '>=2.13'",
             ["matrix", "show", "--torch", ">=2.13"])
        shot("resolve-explain-nvidia.txt", "COLUMNS=80 torchfit resolve --explain   # 2x A100, driver 535",
             ["resolve", "--explain"], a100)
        shot("conflict-8-gpus.txt", "COLUMNS=80 torchfit resolve   # 8x H100, driver 418", ["resolve"], h100)
        shot("doctor-healthy.txt", "COLUMNS=80 torchfit doctor --env ENV   # CPU host, CPU torch",
             ["doctor", "--env", env])
        shot("doctor-broken.txt",
             "COLUMNS=80 torchfit doctor --env ENV   # driver upgraded, not rebooted (NVML mismatch)",
             ["doctor", "--env", env], nvml)
        shot("resolve-broken-driver.txt", "COLUMNS=80 torchfit resolve   # the same host", ["resolve"], nvml)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

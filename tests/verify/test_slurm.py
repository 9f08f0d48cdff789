"""verify/slurm.py: `verify --slurm --print-script`."""

from __future__ import annotations

import subprocess

import torchfit.verify.slurm as vslurm


def test_slurm_script_is_valid_bash() -> None:
    text = vslurm.format_slurm_script(
        4,
        8,
        "/opt/env/bin/python",
        ["/usr/bin/python3", "-m", "torchfit"],
        partition="gpu",
        extra=["--timeout", "60"],
    )
    assert (
        "#SBATCH --nodes=4" in text
        and "#SBATCH --gpus-per-node=8" in text
        and "#SBATCH --partition=gpu" in text
    )
    assert '--rdzv-endpoint "$TORCHFIT_VERIFY_ENDPOINT"' in text and "srun" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


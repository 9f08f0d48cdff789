"""verify/slurm.py: `verify --slurm --print-script`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import torchfit.verify.slurm as vslurm
from tests.support.cli import bad_input, run_clean


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



# --- --slurm option values (#22 of issue 13) -----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["--partition", "gpu\necho pwned"], ["--account", "a b"], ["--time", "abc"], ["--time", "1:2:3:4"]],
    ids=["newline-partition", "space-account", "time-abc", "time-4-parts"],
)
def test_slurm_values_are_checked(args: list[str]) -> None:
    """Defect #22 of the 2026-11 attack (issue 13)."""
    proc = run_clean("verify", "--slurm", "--print-script", "--nodes", "2", "--gpus-per-node", "8", "--python", sys.executable,
              *args)
    bad_input(proc)
    assert "pwned" not in proc.stdout


def test_good_slurm_values_still_work() -> None:
    """Defect #22 of the 2026-11 attack (issue 13)."""
    proc = run_clean("verify", "--slurm", "--print-script", "--nodes", "2", "--gpus-per-node", "8", "--python", sys.executable,
              "--partition", "gpu-h200", "--account", "ml_team", "--time", "1-12:00:00")
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --partition=gpu-h200" in proc.stdout and "#SBATCH --time=1-12:00:00" in proc.stdout


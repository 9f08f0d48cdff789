"""`torchfit verify --slurm`: the sbatch script that runs verify on every node of
an allocation, joined by torchrun's c10d rendezvous on the first node."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def format_slurm_script(
    nodes: int,
    gpus_per_node: int,
    python: str,
    torchfit_cmd: Sequence[str],
    *,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str = "00:15:00",
    port: int = 29400,
    extra: Sequence[str] = (),
) -> str:
    """An sbatch script: one task per node, each running `torchfit verify` with
    torchrun's c10d rendezvous on the first node of the allocation."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# torchfit verify on {nodes} node(s) x {gpus_per_node} GPU(s): every node inspects itself and",
        "# runs its share of one DDP smoke test; torchrun's c10d rendezvous on the first node joins them,",
        "# and each node prints every node's versions side by side. Submit: sbatch THIS_FILE",
        "#SBATCH --job-name=torchfit-verify",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --output=torchfit-verify-%j.out",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [
        "set -euo pipefail",
        "",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'export TORCHFIT_VERIFY_ENDPOINT="$head_node:${{TORCHFIT_RDZV_PORT:-{port}}}"',
        f"export TORCHFIT_VERIFY_PYTHON={q(python)}",
        f"export TORCHFIT_VERIFY_CMD={q(' '.join(q(c) for c in torchfit_cmd))}",
        f"export TORCHFIT_VERIFY_EXTRA={q(' '.join(q(c) for c in extra))}",
        "",
        "# One task per node; SLURM_NODEID and SLURM_JOB_ID are expanded by each task's shell.",
        "srun --ntasks-per-node=1 --kill-on-bad-exit=0 --label bash -c '",
        '  exec $TORCHFIT_VERIFY_CMD verify --python "$TORCHFIT_VERIFY_PYTHON" \\',
        f'    --nnodes "$SLURM_JOB_NUM_NODES" --node-rank "$SLURM_NODEID" --nproc {gpus_per_node} \\',
        '    --rdzv-endpoint "$TORCHFIT_VERIFY_ENDPOINT" --rdzv-id "torchfit-$SLURM_JOB_ID" $TORCHFIT_VERIFY_EXTRA\'',
        "",
    ]
    return "\n".join(lines)

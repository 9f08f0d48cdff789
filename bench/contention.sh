#!/usr/bin/env bash
# Diagnostic (lent GPU machine): where does verify's extra time over the anchor go?
# One kept verify run's timeline, then the anchor alone, with an inspection process beside
# it, and with the nvidia-smi link probe beside it, alternating.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}; RUNS=${2:-3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
PY=$(command -v python3)
anchor() { "$PY" -m torch.distributed.run --standalone --nproc-per-node "$N" --max-restarts 0 bench/ddp_anchor.py --backend nccl 2>/dev/null | tail -1; }
anchor >/dev/null
"$PY" -m torchfit verify --python "$PY" --nproc "$N" --keep --json > /tmp/r.json 2>/dev/null
"$PY" bench/verify_timeline.py "$("$PY" -c 'import json; print(json.load(open("/tmp/r.json"))["work_dir"])')"
TIMEFORMAT='   wall %R s'
for i in $(seq "$RUNS"); do
  echo "== alone";        time anchor
  echo "== + inspection"; rm -f /tmp/i.jsonl; "$PY" src/torchfit/workers/inspect_worker.py /tmp/i.jsonl & time anchor; wait
  echo "== + link probe"; "$PY" -c 'from torchfit.host.links import probe_links; probe_links()' & time anchor; wait
done

#!/usr/bin/env bash
# torchfit verify against a bare torchrun smoke test (bench/ddp_anchor.py) on the lent
# GPU machine, alternating, medians of RUNS; plus the human and JSON reports of one run.
#
#   bash scripts/gpu-bench.sh NPROC [RUNS]        (from the repo root; writes into $OUT)
#
# NVLink multicast stays off (the lent machine's rule), for every process started here:
# torchfit passes its environment to the inspection and to torchrun, torchrun to its workers.
set -uo pipefail
cd "$(dirname "$0")/.."
NPROC=${1:?NPROC}
RUNS=${2:-3}
OUT="${OUT:-$PWD/gpu-bench-out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PY:-$(command -v python3)}"      # the env verified (its torch)
TF="${TF:-$PY}"                          # the interpreter that runs torchfit
{
    date -u; nvidia-smi -L; nvidia-smi topo -m
    "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.device_count())'
    env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
} > "$OUT/host-$NPROC.txt" 2>&1
"$TF" bench/bench_verify.py --python "$PY" --nproc "$NPROC" --runs "$RUNS" --json "$OUT/bench-verify-$NPROC.json" \
    2>&1 | tee "$OUT/bench-verify-$NPROC.txt"
COLUMNS=120 "$TF" -m torchfit verify --python "$PY" --nproc "$NPROC" > "$OUT/verify-$NPROC.txt" 2>&1
"$TF" -m torchfit verify --python "$PY" --nproc "$NPROC" --json > "$OUT/verify-$NPROC.json" 2> "$OUT/verify-$NPROC.stderr"
echo "verify exit $?" >> "$OUT/verify-$NPROC.stderr"
echo "== processes left (must be none):" >> "$OUT/bench-verify-$NPROC.txt"
ps -eo pid,args | grep -E '[d]dp_worker.py|[i]nspect_worker.py|[d]dp_anchor.py|[t]orch.distributed.run' >> "$OUT/bench-verify-$NPROC.txt" || true

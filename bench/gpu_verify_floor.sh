#!/usr/bin/env bash
# verify against its one-process floor on the lent GPU machine (issue 37), alternating
# rounds, wall times of whole processes; "ddp-floor" is bench/ddp_profile.py, one process that also
# builds a 1-rank DDP model and steps it (what any DDP program pays: DDP's constructor imports
# torch._dynamo); then the early stop (a bogus CUDA_VISIBLE_DEVICES
# UUID) and one kept verify's timeline.
#
#   bash bench/gpu_verify_floor.sh [ROUNDS]      (from the repo root; writes into $OUT)
#
# BASE_SRC=DIR (another checkout's src/) adds a third timing per round, "verify-base": the same
# verify from that tree, in the same rounds (an A/B on one machine).
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
OUT="${OUT:-$PWD/gpu-floor-out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PY:-$(command -v python3)}"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'; } > "$OUT/host.txt" 2>&1
timed() {  # NAME CMD...: one line "NAME SECONDS EXIT"
    local name=$1; shift; local s e rc
    s=$EPOCHREALTIME; "$@" > "$OUT/last-$name.out" 2> "$OUT/last-$name.err"; rc=$?; e=$EPOCHREALTIME
    echo "$name $(awk "BEGIN{print $e - $s}") $rc" | tee -a "$OUT/rounds.txt"
}
"$PY" bench/verify_floor.py > /dev/null 2>&1   # one unmeasured round of each (page cache)
"$PY" -m torchfit verify --python "$PY" --json > /dev/null 2>&1
base() {
    if [ -n "${BASE_SRC:-}" ]; then
        PYTHONPATH="$BASE_SRC:${PYTHONPATH#*:}" timed verify-base "$PY" -m torchfit verify --python "$PY" --json
    fi
}
for i in 1 2 3; do  # what a rank's fork server imports: torch, then what DDP's constructor needs
    "$PY" -c 'import time; t = time.perf_counter(); import torch; a = time.perf_counter()
import torch._dynamo; b = time.perf_counter(); print(f"import torch {a - t:.2f} s, then torch._dynamo {b - a:.2f} s")' >> "$OUT/host.txt" 2>&1
done
for i in $(seq 1 "$ROUNDS"); do
    if [ $((i % 2)) = 1 ]; then
        timed floor "$PY" bench/verify_floor.py; timed ddp-floor "$PY" bench/ddp_profile.py
        timed verify "$PY" -m torchfit verify --python "$PY" --json; base
    else
        base; timed verify "$PY" -m torchfit verify --python "$PY" --json
        timed ddp-floor "$PY" bench/ddp_profile.py; timed floor "$PY" bench/verify_floor.py
    fi
    cat "$OUT/last-floor.out" >> "$OUT/floor.jsonl"
done
for i in 1 2 3; do
    CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 timed bogus-cvd "$PY" -m torchfit verify --python "$PY" --json
done
cp "$OUT/last-bogus-cvd.out" "$OUT/bogus-cvd.json"
"$PY" -m torchfit verify --python "$PY" --json --keep > "$OUT/kept.json" 2> "$OUT/kept.err"
"$PY" bench/verify_timeline.py "$("$PY" -c "import json; print(json.load(open('$OUT/kept.json'))['work_dir'])")" > "$OUT/timeline.txt" 2>&1
python3 - "$OUT/rounds.txt" > "$OUT/summary.txt" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, sec, rc in rows:
    by.setdefault(name, []).append(float(sec))
for name, v in by.items():
    print(f"{name:10s} median {statistics.median(v):.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
for f in ("floor", "ddp-floor"):
    for v in ("verify", "verify-base"):
        if f in by and v in by:
            print(f"{v} / {f}: {statistics.median(by[v]) / statistics.median(by[f]):.2f}x")
PYEOF
cat "$OUT/summary.txt"
rm -f "$OUT"/last-*
ps -eo pid,args | grep -E '[d]dp_worker.py|[l]aunch_worker.py|[i]nspect_worker.py|[t]orch.distributed.run' || echo "no process left"

#!/usr/bin/env bash
# torchfit verify on the lent GPU machine (2x H200, no network, torch 2.11.0+cu130
# in the env of its python3; torchfit is not installed there).
#
#   run from the repo root:  bash scripts/gpu-check.sh
#
# Writes into $OUT (the device tool's output folder; ./gpu-check-out without it):
#   host.txt                   nvidia-smi, torch, ldconfig facts of the machine
#   verify.json                the default verify (inspection, DDP, 1 MiB..1 GiB sweep)
#   verify.txt                 the same run's human report (bars), COLUMNS=120
#   verify-preload.json        LD_PRELOAD of the system libnccl.so.2 (ldconfig -p)
#   verify-p2p-off.json        NCCL_P2P_DISABLE=1
#   verify-8g.json             --sizes 1G,8G (against nccl-tests' 332 / 347 GB/s)
#   verify-bad-cvd.json        CUDA_VISIBLE_DEVICES=0,7
#   verify-hang.json           TORCHFIT_VERIFY_FAULT=hang:1 --timeout 20 (NCCL stall, kill)
#   verify-crash.json          TORCHFIT_VERIFY_FAULT=crash:1
#                              (faults come from tests/support/faults, a sitecustomize that
#                              these two runs put on PYTHONPATH; torchfit itself has no hook)
#   NAME.stderr, summary.txt   progress lines; exit code, wall time and key lines of each run
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"

# NVLink multicast must stay off on the lent machine. torchfit passes its whole
# environment to the inspection process and to torchrun, and torchrun passes it to
# every worker; each report's ddp.ranks[].env shows what the workers really saw.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The fault runs only: the test hook that injects TORCHFIT_VERIFY_FAULT into the workers.
FAULTS="PYTHONPATH=$PWD/tests/support/faults:$PYTHONPATH"
PY="$(command -v python3)"
SYS_NCCL="$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')"

{
    echo "== date"; date -u
    echo "== nvidia-smi -L"; nvidia-smi -L
    echo "== nvidia-smi topo -m"; nvidia-smi topo -m
    echo "== python3"; echo "$PY"
    "$PY" -c 'import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.backends.cudnn.version())'
    echo "== ldconfig -p | grep libnccl"; ldconfig -p | grep libnccl
    echo "== system libnccl.so.2: ${SYS_NCCL:-none}"
    echo "== python deps (only the human report wants rich; --json needs none)"
    "$PY" -c 'import rich, resolvelib, packaging; print("rich, resolvelib, packaging: ok")' 2>&1 | tail -1
} > "$OUT/host.txt" 2>&1

TIMEFORMAT='%R'
# run NAME EXPECTED_EXIT [VAR=VALUE ...] -- [verify args ...]
run() {
    local name=$1 expect=$2
    shift 2
    local envs=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local wall rc
    wall=$( { time env "${envs[@]}" "$PY" -m torchfit verify --python "$PY" --json "$@" \
                  > "$OUT/$name.json" 2> "$OUT/$name.stderr"; echo "rc=$?" > "$OUT/$name.rc"; } 2>&1 )
    rc=$(sed 's/rc=//' "$OUT/$name.rc")
    rm -f "$OUT/$name.rc"
    printf '%-16s exit %s (expected %s)  %s s wall  %s\n' "$name" "$rc" "$expect" "$wall" "${envs[*]}" | tee -a "$OUT/summary.txt"
    "$PY" - "$OUT/$name.json" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:  # the run printed no JSON: its stderr says why
    print("   no JSON report:", exc)
    sys.exit(0)
print("   verdict:", r["verdict"][:300])
for c in r["checks"]:
    if c["name"] in ("nccl", "ddp", "bandwidth", "gpus", "ranks-agree") or c["status"] != "pass":
        print("   %-13s %-5s %s" % (c["name"], c["status"], c["summary"][:260]))
bw = r.get("bandwidth") or {}
for row in bw.get("rows") or []:
    if row["bytes"] >= 1 << 28 or row["bytes"] == 1 << 20:
        print("   busbw %5d MiB %7.1f GB/s" % (row["bytes"] >> 20, row["busbw"]))
if bw:
    print("   promise:", bw.get("promise_gbps"), bw.get("promise_source"), "fraction:", bw.get("fraction"))
print("   timings:", r.get("timings"))
for rank in (r.get("ddp") or {}).get("ranks") or []:
    env = rank.get("env") or {}
    keys = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "NCCL_P2P_DISABLE",
            "LD_PRELOAD", "CUDA_VISIBLE_DEVICES")
    print("   rank %s saw: %s; NCCL %s from %s" % (rank["rank"], {k: env[k] for k in keys if k in env},
                                                  (rank.get("nccl") or {}).get("version"), (rank.get("nccl") or {}).get("path")))
EOF
}

: > "$OUT/summary.txt"
run verify          0 --
run verify-preload  1 "LD_PRELOAD=$SYS_NCCL" --
run verify-p2p-off  0 NCCL_P2P_DISABLE=1 --
run verify-8g       0 -- --sizes 1G,8G
run verify-bad-cvd  1 CUDA_VISIBLE_DEVICES=0,7 --
run verify-hang     1 "$FAULTS" TORCHFIT_VERIFY_FAULT=hang:1 -- --timeout 20
run verify-crash    1 "$FAULTS" TORCHFIT_VERIFY_FAULT=crash:1 -- --timeout 60

# The human report of the default run (rich bars, or plain text without rich).
{ time COLUMNS=120 "$PY" -m torchfit verify --python "$PY" > "$OUT/verify.txt" 2>&1; } 2>> "$OUT/summary.txt"

echo "== processes left (must be none):" | tee -a "$OUT/summary.txt"
ps -eo pid,ppid,etime,args | grep -E '[d]dp_worker.py|[i]nspect_worker.py|[t]orch.distributed.run' | tee -a "$OUT/summary.txt" || true
echo "done: $OUT" | tee -a "$OUT/summary.txt"

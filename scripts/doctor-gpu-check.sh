#!/usr/bin/env bash
# torchfit doctor on the lent 2x H200 machine (issue 5): the record of what it reports.
#
# Run from the repository root on the GPU machine (no network, torchfit not installed,
# torch 2.11.0+cu130 in the env of `python3`):
#
#     OUT=/path/to/reports bash scripts/doctor-gpu-check.sh
#
# It runs `torchfit doctor --json` against python3's env three times and writes to $OUT:
#   baseline.*      as the machine is: expect nothing failed, and nccl-shadowed a warning
#                   naming the system libnccl 2.28.3 beside torch's bundled 2.28.9
#   ld-preload.*    with LD_PRELOAD of the system libnccl.so.2 (from `ldconfig -p`): expect
#                   nccl-shadowed to say torch runs 2.28.3 via LD_PRELOAD
#   p2p-disabled.*  with NCCL_P2P_DISABLE=1: expect nccl-env-disables to warn
# (.json the report, .txt the table), context.txt (driver, GPUs, libraries, torch) and
# summary.txt: each expectation checked, each run's exit status, wall time and stderr.
# Eight files in all (the device tool brings back only a few). Exit status 0 when
# every expectation held, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the directory for the reports}"
mkdir -p "$OUT"

# Keep NVLink SHARP / multicast off on the lent machine (its rules).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v python3) || { echo "no python3 on PATH" >&2; exit 2; }
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
SYS_NCCL=$("$LDCONFIG" -p | awk '$1 == "libnccl.so.2" { print $NF; exit }')

{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) $(git rev-parse --short HEAD 2>/dev/null) (working tree may differ)"
  echo "## nvidia-smi --query-gpu"; nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv
  echo "## ldconfig -p | grep nccl/cudnn"; "$LDCONFIG" -p | grep -E 'libnccl|libcudnn\.so'
  echo "## system libnccl.so.2 -> $(readlink -f "${SYS_NCCL:-/nonexistent}")"
  echo "## python3: $PY"
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.backends.cudnn.version())'
  echo "## env"; env | grep -E '^(NCCL_|CUDA_|LD_|TORCH_SYMM|NVSHMEM)' | sort
} > "$OUT/context.txt" 2>&1

RUNS=$(mktemp -d)
trap 'rm -rf "$RUNS"' EXIT

# run NAME [VAR=VALUE...]: doctor --json and the table under that environment.
run() {
  local name=$1; shift
  local start end
  start=$(date +%s.%N)
  env "$@" "$PY" -m torchfit doctor --python "$PY" --json > "$OUT/$name.json" 2> "$RUNS/$name.stderr"
  echo $? > "$RUNS/$name.rc"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f\n", b - a }' > "$RUNS/$name.seconds"
  env COLUMNS=160 "$@" "$PY" -m torchfit doctor --python "$PY" > "$OUT/$name.txt" 2>&1 || true
}

run baseline
if [ -n "$SYS_NCCL" ]; then
  run ld-preload "LD_PRELOAD=$SYS_NCCL"
else
  echo "ldconfig -p lists no libnccl.so.2" > "$RUNS/ld-preload.stderr"
fi
run p2p-disabled NCCL_P2P_DISABLE=1

"$PY" - "$OUT" "$SYS_NCCL" "$RUNS" > "$OUT/summary.txt" <<'EOF'
import json, os, sys

out, sys_nccl, runs = sys.argv[1], sys.argv[2], sys.argv[3]
ok = True


def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        return {"error": str(exc), "checks": []}


def check(report, cid):
    return next((c for c in report.get("checks", []) if c["id"] == cid), {"status": "missing", "evidence": ""})


def expect(what, cond, detail=""):
    global ok
    ok = ok and bool(cond)
    print(("PASS " if cond else "FAIL ") + what + (f"\n     {detail}" if detail else ""))


base = load("baseline")
fails = [c["id"] for c in base.get("checks", []) if c["status"] == "fail"]
expect("baseline: doctor ran, exit 0, nothing failed", base.get("ok") is True and not fails,
       f"failed: {fails} {base.get('error', '')}")
n = check(base, "nccl-shadowed")
expect("baseline: nccl-shadowed warns about the system libnccl 2.28.3 beside the bundled 2.28.9",
       n["status"] == "warn" and "2.28.3" in n["evidence"] and "2.28.9" in n["evidence"], n["evidence"])
for cid in ("nvidia-smi", "driver-too-old", "arch-not-covered", "nvlink-no-p2p", "torch-cpu-build"):
    c = check(base, cid)
    expect(f"baseline: {cid} ok", c["status"] == "ok", c["evidence"])

if sys_nccl:
    pre = load("ld-preload")
    n = check(pre, "nccl-shadowed")
    expect("LD_PRELOAD: nccl-shadowed says torch runs the system NCCL 2.28.3 via LD_PRELOAD",
           n["status"] in ("warn", "fail") and "via LD_PRELOAD" in n["evidence"] and "NCCL 2.28.3" in n["evidence"],
           n["evidence"])
else:
    expect("LD_PRELOAD: a system libnccl.so.2 on ldconfig -p", False)

p2p = load("p2p-disabled")
c = check(p2p, "nccl-env-disables")
expect("NCCL_P2P_DISABLE=1: nccl-env-disables warns", c["status"] == "warn" and "NCCL_P2P_DISABLE=1" in c["evidence"],
       c["evidence"])

def read(name):
    try:
        with open(os.path.join(runs, name)) as fh:
            return fh.read().strip()
    except OSError:
        return "?"


for name in ("baseline", "ld-preload", "p2p-disabled"):
    print(f"{name}: exit {read(name + '.rc')}, {read(name + '.seconds')} s")
    err = read(name + ".stderr")
    if err and err != "?":
        print("  stderr: " + "\n  stderr: ".join(err.splitlines()[-10:]))
print("ALL EXPECTATIONS HELD" if ok else "SOME EXPECTATIONS FAILED")
sys.exit(0 if ok else 1)
EOF
status=$?
cat "$OUT/summary.txt"
exit $status

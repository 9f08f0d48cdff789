#!/usr/bin/env bash
# verify on CPU (gloo, 2 ranks) against another checkout's verify, alternating rounds, wall times
# of whole processes, medians; then one kept run's timeline (issue 37, where no GPU is lent).
#
#   BASE_SRC=/path/to/other/src ENV=/path/to/cpu-torch-env bash bench/cpu_verify_ab.sh [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
OUT="${OUT:-$PWD/cpu-verify-out}"
mkdir -p "$OUT"; : > "$OUT/rounds.txt"
PY="${PY:-$PWD/.venv/bin/python}"
run() {  # NAME SRC: one line "NAME SECONDS EXIT"
    local s e rc
    s=$EPOCHREALTIME; PYTHONPATH="$2" "$PY" -m torchfit verify --env "$ENV" --backend gloo --nproc 2 --json > "$OUT/last-$1.json" 2>/dev/null; rc=$?; e=$EPOCHREALTIME
    echo "$1 $(awk "BEGIN{print $e - $s}") $rc" | tee -a "$OUT/rounds.txt"
}
run verify "$PWD/src" > /dev/null; run verify-base "$BASE_SRC" > /dev/null; : > "$OUT/rounds.txt"  # warm
for i in $(seq 1 "$ROUNDS"); do
    if [ $((i % 2)) = 1 ]; then run verify "$PWD/src"; run verify-base "$BASE_SRC"
    else run verify-base "$BASE_SRC"; run verify "$PWD/src"; fi
done
PYTHONPATH="$PWD/src" "$PY" -m torchfit verify --env "$ENV" --backend gloo --nproc 2 --json --keep > "$OUT/kept.json" 2>/dev/null
"$PY" bench/verify_timeline.py "$("$PY" -c "import json; print(json.load(open('$OUT/kept.json'))['work_dir'])")" > "$OUT/timeline.txt"
rm -rf "$("$PY" -c "import json; print(json.load(open('$OUT/kept.json'))['work_dir'])")" "$OUT"/last-*
"$PY" - "$OUT/rounds.txt" <<'PYEOF' | tee "$OUT/summary.txt"
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    name, sec, rc = line.split()
    by.setdefault(name, []).append(float(sec))
for name, v in by.items():
    print(f"{name:12s} median {statistics.median(v):.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
if "verify" in by and "verify-base" in by:
    print(f"verify / verify-base: {statistics.median(by['verify']) / statistics.median(by['verify-base']):.2f}x")
PYEOF

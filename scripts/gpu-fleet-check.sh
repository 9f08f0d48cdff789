#!/usr/bin/env bash
# Issue 19 on a GPU node (the lent H200): the node check's time on a healthy node, and
# verify with NCCL_SOCKET_IFNAME naming no interface, beside doctor and beside NCCL's
# own error for the same setting. Writes its files to $OUT (default /tmp/torchfit-fleet-check).
#   PYTHON=python3 scripts/gpu-fleet-check.sh
set -u
out=${OUT:-/tmp/torchfit-fleet-check}
mkdir -p "$out"
# NVLink multicast stays off, in every child too (the lent machines' rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
log="$out/log.txt"
step() { echo "=== $*" | tee -a "$log"; }
{
  step "host"; date -u; git log --oneline -1 2>/dev/null; nvidia-smi -L; ls /sys/class/net
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} >> "$log" 2>&1

step "1. doctor --node-check on a healthy node, 11 fresh processes"
"$py" bench/bench_nodecheck.py -n 11 --json "$out/nodecheck.json" >> "$log" 2>&1

step "2. verify with NCCL_SOCKET_IFNAME=bogus0 (no interface has it)"
NCCL_SOCKET_IFNAME=bogus0 "$py" -m torchfit verify --python "$py" --no-bandwidth --timeout 120 \
  > "$out/verify-bogus.txt" 2>&1
echo "exit $?" >> "$out/verify-bogus.txt"
NCCL_SOCKET_IFNAME=bogus0 "$py" -m torchfit verify --python "$py" --no-bandwidth --timeout 120 --json \
  > "$out/verify-bogus.json" 2>> "$log"
step "2b. doctor, same setting"
NCCL_SOCKET_IFNAME=bogus0 "$py" -m torchfit doctor --python "$py" --json > "$out/doctor-bogus.json" 2>> "$log"
NCCL_SOCKET_IFNAME=bogus0 "$py" -m torchfit doctor --node-check >> "$log" 2>&1; echo "node-check exit $?" >> "$log"

step "3. what NCCL itself says with it (one rank, torchrun, an all-reduce)"
cat > /tmp/tf-nccl-raw.py <<'PY'
import torch, torch.distributed as dist
dist.init_process_group("nccl")
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("all_reduce ->", t.item())
dist.destroy_process_group()
PY
NCCL_SOCKET_IFNAME=bogus0 timeout 120 "$py" -m torch.distributed.run --standalone --nproc-per-node 1 \
  /tmp/tf-nccl-raw.py >> "$log" 2>&1
echo "raw exit $?" >> "$log"

step "4. verify on the same node without it (the check passes, NCCL runs)"
"$py" -m torchfit verify --python "$py" --no-bandwidth --timeout 120 --json > "$out/verify-healthy.json" 2>> "$log"
echo "healthy exit $?" >> "$log"
step "done"

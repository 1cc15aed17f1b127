#!/usr/bin/env bash
# NCCL in the loop on this node's GPUs (issue 11): what to run once on a GPU machine.
#
#   scripts/gpu-check.sh [BUILD_DIR]        (default build/release; built here if missing)
#
# 1. `topo-aware nccl-check`: starts NCCL on every GPU CUDA sees with NCCL_TOPO_DUMP_FILE and
#    NCCL_GRAPH_DUMP_FILE, alone and given the NCCL_TOPO_FILE we write, and compares NCCL's view
#    (GPUs, NICs, paths, bandwidths) with our live node model and with our file.
# 2. An nccl-tests-style all-reduce sweep (our own timing loop through the dlopen'd CUDA runtime
#    and NCCL: float sum, out of place, WARMUP untimed then ITERS timed iterations per size),
#    NCCL alone and NCCL given our file, beside the cost model's bus bandwidth for this node.
#
# SIZES (bytes per GPU, comma-separated), ITERS, WARMUP tune the sweep; OUT (default
# gpu-check-<host>-<date>) keeps the dumps, our XML and the printed report for docs/calibration.md.
# Exit codes: 0 done and the views agree, 1 they differ or NCCL failed, 77 skipped (no GPU, or
# libcudart/libnccl not loadable; CUDA_HOME or LD_LIBRARY_PATH point at them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${1:-build/release}
sizes=${SIZES:-67108864,268435456,1073741824,4294967296}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
out=${OUT:-gpu-check-$(hostname -s)-$(date +%Y%m%d-%H%M%S)}
bin=$build/tools/topo-aware

if [ ! -x "$bin" ]; then
  echo "== build ($build)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target topo-aware
fi

mkdir -p "$out"
echo "== this node"
"$bin" discover | tee "$out/discover.txt"
nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1 || true

echo "== nccl-check, with an all-reduce sweep (sizes $sizes bytes per GPU)"
set +e
"$bin" nccl-check --keep "$out" --limit 0 --allreduce --bytes "$sizes" --iters "$iters" \
  --warmup "$warmup" 2>&1 | tee "$out/nccl-check.txt"
rc=${PIPESTATUS[0]}
set -e
case $rc in
  0) echo "== done: NCCL's view agrees with ours; report and dumps in $out" ;;
  77) echo "== skipped (see the reason above); nothing measured" ;;
  *) echo "== nccl-check exited $rc; report and dumps in $out" ;;
esac
exit "$rc"

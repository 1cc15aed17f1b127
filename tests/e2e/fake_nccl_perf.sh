#!/bin/bash
# A stand-in for one nccl-tests binary (all_reduce_perf, sendrecv_perf, ...: the name it is
# copied to) where there is no GPU: the lab's test of scripts/calibrate.sh copies it under each
# name into a fake nccl-tests folder. Started by srun, one task per "GPU" (-g 1), it prints what
# an MPI build of nccl-tests prints, in its format: rank 0 the header, the "Using devices" lines
# with every rank's real host name (gathered through files next to this script, as the MPI build
# gathers them), the size table from -b to -e by -f; every rank NCCL's INFO lines when
# NCCL_DEBUG=INFO, with the subsystems NCCL_DEBUG_SUBSYS names. Bus bandwidths are made up.
set -euo pipefail
name=$(basename "$0")
min=1M max=4G factor=2 gpus=1
while [ $# -gt 0 ]; do
  case $1 in
    -b|--minbytes) min=$2; shift 2 ;;
    -e|--maxbytes) max=$2; shift 2 ;;
    -f|--stepfactor) factor=$2; shift 2 ;;
    -g|--ngpus) gpus=$2; shift 2 ;;
    *) shift ;;
  esac
done
bytes() {
  local n=${1%[KkMmGg]}
  case $1 in
    *[Kk]) echo $((n << 10)) ;; *[Mm]) echo $((n << 20)) ;; *[Gg]) echo $((n << 30)) ;; *) echo "$n" ;;
  esac
}
rank=${SLURM_PROCID:-0} nranks=${SLURM_NTASKS:-1} local=${SLURM_LOCALID:-0}
host=$(hostname)
pid=$$
info() { [ "${NCCL_DEBUG:-}" != INFO ] || echo "$host:$pid:$pid [$local] NCCL INFO $*"; }
subsys() { [[ ,${NCCL_DEBUG_SUBSYS:-INIT}, == *",$1,"* ]]; }

# The MPI build's allgather of host names: each rank leaves a line, rank 0 reads them all.
meet=$(dirname "$0")/rendezvous/${SLURM_JOB_ID:-0}.${SLURM_STEP_ID:-0}
mkdir -p "$meet"
printf '%d %s %d %d\n' "$rank" "$host" "$pid" "$local" >"$meet/.$rank"
mv "$meet/.$rank" "$meet/$rank"

if [ "$rank" -eq 0 ]; then
  for _ in $(seq 1 300); do
    [ "$(find "$meet" -mindepth 1 -maxdepth 1 -type f -name '[0-9]*' | wc -l)" -ge "$nranks" ] && break
    sleep 0.1
  done
  echo "# nccl-tests version 2.14.1 nccl-headers=22105 nccl-library=22105"
  echo "# Collective test starting: $name"
  echo "# nThread 1 nGpus $gpus minBytes $(bytes "$min") maxBytes $(bytes "$max") step: $factor(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0"
  echo "#"
  echo "# Using devices"
  for r in $(seq 0 $((nranks - 1))); do
    read -r _ h p l <"$meet/$r"
    printf '#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x%02x] NVIDIA H100 80GB HBM3\n' \
      "$r" "$p" "$h" "$l" $((0x18 + 16 * l))
  done
  [ "${NCCL_DEBUG:-}" != INFO ] || echo "NCCL version 2.21.5+cuda12.4"
fi
if subsys ENV; then info "NCCL_DEBUG_SUBSYS set by environment to ${NCCL_DEBUG_SUBSYS:-}"; fi
if subsys INIT; then
  info "Bootstrap : Using eth0:10.77.0.1${host#node}<0>"
  info "comm 0x55d0c0de rank $rank nranks $nranks cudaDev $local nvmlDev $local busId $((18 + local))000 commId 0x1234 - Init START"
  info "Channel 00/16 : $(seq -s ' ' 0 $((nranks - 1)))"
  info "comm 0x55d0c0de rank $rank nranks $nranks cudaDev $local nvmlDev $local busId $((18 + local))000 commId 0x1234 - Init COMPLETE"
fi
if subsys TUNING && [ "$rank" -eq 0 ]; then
  info "AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 45.000000"
fi
[ "$rank" -eq 0 ] || exit 0
echo "#"
echo "#                                                              out-of-place                       in-place          "
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
echo "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
s=$(bytes "$min") e=$(bytes "$max")
while [ "$s" -le "$e" ]; do
  printf '%12d  %12d     float     sum      -1  %7.2f  %6.2f  %6.2f      0  %7.2f  %6.2f  %6.2f      0\n' \
    "$s" $((s / 4)) "$(awk "BEGIN{print $s/1e4}")" 100 180 "$(awk "BEGIN{print $s/1e4}")" 100 180
  s=$((s * factor))
done
echo "# Out of bounds values : 0 OK"
echo "# Avg bus bandwidth    : 180 "
echo "#"
echo "# Collective test concluded: $name"

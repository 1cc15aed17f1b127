#!/usr/bin/env python3
"""An MPI program's start-up under srun --mpi=pmix, for the end-to-end test: its COMM_WORLD
rank (from PMIx, i.e. Slurm's task id), what topo-aware exported beside it, and one allreduce.
Prints one line per rank for check_plan.py."""
import os
import socket

from mpi4py import MPI


def main():
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    total = "ok" if comm.allreduce(rank + 1) == world * (world + 1) // 2 else "BAD"
    print(f"rank={rank} env_rank={os.environ.get('RANK', '-')} "
          f"procid={os.environ.get('SLURM_PROCID', '-')} slurm_procid=- "
          f"host={socket.gethostname()} local={local} "
          f"gpu={devices[local] if local < len(devices) else '-'} world={world} sum={total} "
          f"groups=-", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What jax.distributed.initialize() would take from this Slurm task, without JAX (Debian does
not package it). JAX's Slurm cluster detection (jax/_src/clusters/slurm_cluster.py) reads:
process_id = SLURM_PROCID, num_processes = SLURM_NTASKS, local_device_ids = [SLURM_LOCALID],
and the coordinator, which process 0 serves, from JAX_COORDINATOR_ADDRESS when set, else the
first host of SLURM_STEP_NODELIST with a port derived from SLURM_JOB_ID. Prints one line per
process for check_plan.py, which checks that process 0 runs where the coordinator is."""
import os
import re
import socket


def main():
    coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS")
    if not coordinator:
        nodes = os.environ["SLURM_STEP_NODELIST"]
        first = re.split(r"[,\[]", nodes, maxsplit=1)[0]
        bracket = re.match(r"[^\[,]*\[(\d+)", nodes)
        coordinator = (first + (bracket.group(1) if bracket else "") + ":" +
                       str(int(os.environ["SLURM_JOB_ID"]) % 4096 + 61440))
    print(f"process_id={os.environ['SLURM_PROCID']} num={os.environ['SLURM_NTASKS']} "
          f"local={os.environ['SLURM_LOCALID']} coordinator={coordinator} "
          f"rank={os.environ.get('RANK', '-')} host={socket.gethostname()}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A training job's start-up as torch.distributed sees it, for the end-to-end test.

Initialises gloo the way the job's launcher documents it -- env:// (RANK, WORLD_SIZE,
MASTER_ADDR/PORT, as Megatron and torchrun's workers read them), or with --slurm the way
Lightning's SLURMEnvironment does (rank and world from SLURM_PROCID/SLURM_NTASKS, local rank
from SLURM_LOCALID, the address from MASTER_ADDR/PORT) -- then all-reduces over every rank and,
where TOPO_AWARE_COORDS is set, over each group of each parallel dim built from the
coordinates every rank reports. Prints one line per rank for check_plan.py. --hold SECONDS keeps
the process group (and rank 0's store on MASTER_PORT) open that long between two barriers, so
that steps started together overlap.
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def groups_of(rank, world):
    """All-reduces in every group of every dim; returns ["tp:ok", ...]."""
    coords = os.environ.get("TOPO_AWARE_COORDS")
    if not coords:
        return []
    mine = {k: int(v) for k, v in (c.split(":") for c in coords.split(","))}
    everyone = [None] * world
    dist.all_gather_object(everyone, (rank, mine))
    out = []
    for dim in mine:
        groups = {}
        for r, c in sorted(everyone):
            key = tuple(sorted((k, v) for k, v in c.items() if k != dim))
            groups.setdefault(key, []).append(r)
        member = None
        for key in sorted(groups):  # every rank creates every group, in one order
            g = dist.new_group(groups[key])
            if rank in groups[key]:
                member = (g, groups[key])
        x = torch.tensor([float(rank + 1)])
        dist.all_reduce(x, group=member[0])
        ok = x.item() == sum(m + 1 for m in member[1])
        out.append(f"{dim}:{'ok' if ok else 'BAD'}")
    return out


def main():
    if "--slurm" in sys.argv:
        rank = int(os.environ["SLURM_PROCID"])
        world = int(os.environ["SLURM_NTASKS"])
        local = int(os.environ["SLURM_LOCALID"])
        addr = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        dist.init_process_group("gloo", init_method=addr, rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo")
        local = int(os.environ["LOCAL_RANK"])
    rank, world = dist.get_rank(), dist.get_world_size()
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    total = "ok" if t.item() == world * (world + 1) / 2 else "BAD"
    groups = ",".join(groups_of(rank, world)) or "-"
    if "--hold" in sys.argv:
        dist.barrier()
        time.sleep(float(sys.argv[sys.argv.index("--hold") + 1]))
        dist.barrier()
    print(f"rank={rank} env_rank={os.environ.get('RANK', '-')} "
          f"procid={os.environ.get('SLURM_PROCID', '-')} "
          f"slurm_procid={os.environ.get('TOPO_AWARE_SLURM_PROCID', '-')} "
          f"host={socket.gethostname()} local={local} "
          f"gpu={devices[local] if local < len(devices) else '-'} world={world} sum={total} "
          f"groups={groups} port={os.environ.get('MASTER_PORT', '-')}", flush=True)
    # Every rank past its groups' collectives before any tears down: on torch 2.6 (Debian 13) a
    # rank that destroys the group first can leave the others waiting on its store for good.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks what a real client reported (torch_check.py, mpi_check.py, jax_check.py lines) against
the plan `topo-aware map --of json` gives for the same inputs. Prints one line per mismatch and
exits 1 when there is any.

  check_plan.py per-gpu  PLAN OUT   Slurm task t reports the plan's rank, host and GPU for task t
  check_plan.py slurm-ids PLAN OUT  the same, Slurm's task id taken from TOPO_AWARE_SLURM_PROCID
  check_plan.py by-rank  PLAN OUT   rank r (a torchrun worker's, an MPI rank) runs on the plan's
                                    host and GPU for rank r
  check_plan.py jax PLAN OUT HOST=ADDR,...  process ids are the plan's ranks, and process 0 runs
                                    on the host the coordinator address names
"""
import json
import sys


def lines_of(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("[") and "]:" in line:  # torchrun --tee's "[default0]:" prefix
                line = line.split("]:", 1)[1]
            fields = dict(x.split("=", 1) for x in line.split() if "=" in x)
            if "rank" in fields or "process_id" in fields:
                out.append(fields)
    return out


def main():
    mode, plan_path, out_path = sys.argv[1:4]
    plan = json.load(open(plan_path))["ranks"]
    by_task = {p["task"]: p for p in plan}
    by_rank = {p["rank"]: p for p in plan}
    lines = lines_of(out_path)
    bad = []
    if len(lines) != len(plan):
        bad.append(f"{len(lines)} reports for {len(plan)} ranks")
    if mode == "jax":
        addr = dict(x.split("=") for x in sys.argv[4].split(","))
        ids = sorted(int(l["process_id"]) for l in lines)
        if ids != list(range(len(plan))):
            bad.append(f"process ids {ids}")
        for l in lines:
            if l["process_id"] != l["rank"]:
                bad.append(f"process {l['process_id']}: the plan's rank is {l['rank']}")
            if l["process_id"] == "0":
                host = l["coordinator"].rsplit(":", 1)[0]
                if host not in (l["host"], addr.get(l["host"])):
                    bad.append(f"process 0 runs on {l['host']}, the coordinator is {host}")
    else:
        ranks = []
        for l in lines:
            r = int(l["rank"])
            ranks.append(r)
            if mode == "by-rank":
                want = by_rank.get(r)
            else:
                t = int(l["procid"] if mode == "per-gpu" else l["slurm_procid"])
                want = by_task.get(t)
                if want is not None and want["rank"] != r:
                    bad.append(f"task {t}: rank {r}, the plan's is {want['rank']}")
            if want is None:
                bad.append(f"rank {r}: not in the plan")
                continue
            if l["env_rank"] not in ("-", l["rank"]):
                bad.append(f"rank {r}: RANK={l['env_rank']}")
            if l["host"] != want["host"] or l["gpu"] != str(want["gpu"]):
                bad.append(f"rank {r} on {l['host']} GPU {l['gpu']}, the plan's is "
                           f"{want['host']} GPU {want['gpu']}")
            if l["sum"] != "ok" or "BAD" in l.get("groups", ""):
                bad.append(f"rank {r}: all-reduce sum={l['sum']} groups={l.get('groups')}")
        if sorted(ranks) != list(range(len(plan))):
            bad.append(f"ranks {sorted(ranks)}")
    for b in bad:
        print("check_plan:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

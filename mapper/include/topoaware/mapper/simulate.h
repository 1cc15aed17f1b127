// Replaying a job trace (trace.h) on a cluster under one placer, so that placers can be compared
// over a cluster's history rather than one job: how long jobs wait, how much their modeled
// communication slows them, how the free hosts fragment.
//
// The cluster is a fabric, every usable host with `gpus_per_host` GPUs of one node model. The
// queue is the same for every placer: one FIFO queue with EASY backfill. The head job gets a
// reservation at the earliest time enough resources free up (from the running jobs' end times,
// counted, not placed); a later job may start now if the placer finds it room and it either
// ends by then or leaves the head enough to start then. Run times are known exactly (a perfect
// estimate, where Slurm has the user's time limit). Jobs of fewer GPUs than a host share hosts
// and go, for every placer, to the host with the fewest free GPUs that holds them (best fit;
// ties to the lowest index); jobs of a host or more take ceil(gpus / gpus_per_host) whole hosts
// chosen by the placer:
//   flat           Slurm without a topology plugin (slurm::select_flat)
//   tree           Slurm's topology/tree (slurm::select_tree)
//   tree-switches  topology/tree with --switches=1@switch_wait_s: the job waits while Slurm
//                  would (one leaf or the wait runs out, counted from its submit), then spreads
//   block          Slurm's topology/block (slurm::select_block) over the fabric's leaf groups as
//                  base blocks (slurm::blocks_of): a job waits for an aligned block; one that no
//                  block could ever hold is left out and counted (never_placed)
//   place          the project's placer (place.h), the lowest modeled communication
//   place-load     place, scoring on the fabric as the running jobs leave it: each leaf's
//                  uplink less their expected load (with ReplayOptions::contention; else place)
// Each job's run time is stretched by its modeled communication slowdown (SlowdownModel):
// duration x (1 + comm_fraction x (slowdown - 1)). Single-host jobs are not slowed.
//
// Pure and deterministic: no I/O, no clock, no randomness; progress goes to a callback.
// docs/placement.md, "Replaying a busy cluster". Bad input throws Error (layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/mapper/trace.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

enum class Placer { kFlat, kTree, kTreeSwitches, kBlock, kPlace, kPlaceLoad };
// "flat", "tree", "tree-switches", "block", "place", "place-load"
std::string_view to_string(Placer p);
Placer placer_from(std::string_view name);  // throws Error for an unknown name

// A multi-host job's modeled slowdown on its hosts: the mapper's modeled exposed communication
// per step there (score_allocation, the plan the mapper would make) against the same job on the
// best allocation place() finds on an empty cluster; at least 1 (an allocation modeled below
// place's empty-cluster choice counts as the best). The job's layout, since a trace has none:
// tp = the host's GPUs, pp = the largest divisor of the host count up to min(8, hosts / 2), dp
// the rest: every multi-host job has data-parallel traffic between hosts (dp >= 2), pipelines
// of up to 8 stages as large jobs run them (2 hosts: dp=2; 8: pp=4, dp=2; 64: pp=8, dp=8).
// Evaluations are cached by the host set's structure: the host count and, per grouping level
// (group_levels()), the sorted counts of the set's hosts in each group it touches -- exact on a
// symmetric fabric, where sets of one structure cost the same, and an approximation on others.
class SlowdownModel {
 public:
  // `fabric` and `node` must outlive the model. refine_moves: the mapper's refinement budget
  // for each plan scored (0: none, the fastest; -1: the mapper's default).
  SlowdownModel(const topology::Fabric& fabric, const topology::NodeTopology& node,
                int gpus_per_host, long long refine_moves = 0);
  double slowdown(const std::vector<std::uint32_t>& hosts);
  // The same job while other jobs' traffic shares its leaves' uplinks: `leaf_share` maps a leaf
  // group (the innermost grouping level's) to the share of its uplink capacity left to this job
  // (0 < share <= 1); the job's plan is scored on the fabric with those uplinks cut to that share.
  // Not cached: the shares vary with what else runs.
  double slowdown_sharing(const std::vector<std::uint32_t>& hosts,
                          const std::map<std::uint32_t, double>& leaf_share);
  // A leaf group's uplink capacity as the mapper sizes it (GB/s; 0: no limit): the given one,
  // or, where the source gave no speed, its hosts' capacity over the tier's declared ratio.
  double leaf_uplink_gbps(std::uint32_t group) const;
  // The layout described above, for a job of `hosts` whole hosts.
  static std::string layout_for(std::uint32_t hosts, int gpus_per_host);
  std::size_t evaluations() const { return evaluations_; }
  std::size_t cache_hits() const { return hits_; }

 private:
  const topology::Fabric* fabric_;
  const topology::NodeTopology* node_;
  int gpus_per_host_;
  long long refine_moves_;
  std::vector<std::size_t> levels_;
  std::map<std::uint32_t, double> best_;                    // hosts -> empty-cluster seconds
  std::map<std::vector<std::uint32_t>, double> slowdowns_;  // structure key -> slowdown
  double best_seconds(std::uint32_t hosts);  // the empty cluster's best for `hosts` hosts
  std::size_t evaluations_ = 0, hits_ = 0;
};

struct ReplayOptions {
  int gpus_per_host = 8;
  double comm_fraction = 0.3;  // share of a job's run time that is communication
  // Contention between jobs on a leaf's uplinks. A multi-host job that spans leaves starts
  // while other such jobs hold hosts in its leaves. Each of their hosts is taken to send across
  // the uplink at its full port capacity for comm_fraction of the time (the expected load).
  // Where this job's hosts at full rate plus that load exceed the uplink, the job gets the larger
  // of what is left and its share in proportion to demand. Its plan is scored with that
  // capacity (SlowdownModel::slowdown_sharing). What it sees at its start holds for its whole
  // run.
  bool contention = true;
  double switch_wait_s = 300;  // tree-switches: --switches=1@this
  // Called after every `progress_every` job starts: (jobs started, jobs to replay, sim time s).
  std::function<void(std::size_t, std::size_t, double)> progress;
  std::size_t progress_every = 1000;
};

// One replayed job.
struct JobOutcome {
  std::size_t job = 0;                   // index in the trace's jobs
  double start = 0, end = 0;             // seconds, the trace's clock
  std::uint32_t hosts = 0;               // hosts it ran on (1 for a part of one)
  std::vector<std::uint32_t> placed_on;  // those hosts (fabric indexes, ascending)
  std::size_t leaves = 0;                // innermost groups (leaves) its hosts touch
  std::size_t spines = 1;                // groups of the level above (spines, pods) they touch
  double locality = 1;                   // share of its hosts in its fullest leaf
  double slowdown = 1;                   // modeled (SlowdownModel); 1 for single-host jobs
  bool shared = false;  // charged for other jobs' traffic on its leaves' uplinks (contention)
};

struct Replay {
  Placer placer = Placer::kFlat;
  std::vector<JobOutcome> jobs;  // the jobs that ran, in start order
  std::size_t too_large = 0;     // jobs wanting more GPUs than the cluster has: not replayed
  std::size_t never_placed = 0;  // jobs the placer would never start (block): not replayed
  double first_submit = 0, last_end = 0;
  double gpu_seconds = 0;    // GPUs x stretched run time, summed over jobs
  double capacity_gpus = 0;  // usable hosts x GPUs per host
  // fragmentation() of the wholly free hosts right after each start, summed, and the count.
  double fragmentation_sum = 0;
  std::size_t fragmentation_samples = 0;
  // The same samples over time: (start time, fragmentation right after it), in start order.
  std::vector<std::pair<double, double>> fragmentation_over_time;
};

// The share of the cluster's GPUs held by running jobs over time, as a step function: (time,
// share from then on), one point per instant at which jobs start or end, in time order, the
// last one 0 at the last end. A job holds the GPUs it asked for on a part of a host, and every
// GPU of the whole hosts it took otherwise (what no other job could use).
std::vector<std::pair<double, double>> utilisation_over_time(const Replay& r,
                                                             const std::vector<TraceJob>& jobs,
                                                             int gpus_per_host);

// Replays `jobs` (submit order) on the cluster under `placer`. `model` may be shared between
// placers of one cluster (its cache then serves them all). Throws Error for a fabric without
// usable hosts or gpus_per_host < 1.
Replay replay(const topology::Fabric& fabric, const topology::NodeTopology& node,
              const std::vector<TraceJob>& jobs, Placer placer, const ReplayOptions& options,
              SlowdownModel& model);

// What the report shows of one replay. Percentiles are nearest-rank; 0 where there is no job.
struct ReplaySummary {
  std::size_t jobs = 0, multi_host = 0, too_large = 0, never_placed = 0;
  double wait_median_s = 0, wait_p95_s = 0;
  double jct_median_s = 0, jct_p95_s = 0;        // completion time: end - submit
  double slowdown_median = 1, slowdown_p95 = 1;  // multi-host jobs
  double leaves_mean = 0;                        // multi-host jobs
  double spines_mean = 0;                        // multi-host jobs
  std::size_t shared = 0;  // multi-host jobs charged for other jobs' traffic (contention)
  double locality_mean = 1;  // multi-host jobs: share of the hosts in the fullest leaf
  double utilisation = 0;    // gpu_seconds / (capacity x (last end - first submit))
  double fragmentation_mean = 0;
  double makespan_s = 0;  // last end - first submit
};
ReplaySummary summarize(const Replay& r, const std::vector<TraceJob>& jobs);

}  // namespace topoaware::mapper

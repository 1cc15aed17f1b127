// What a machine measured, read back from the text nccl-tests and NCCL print: the results table of
// each nccl-tests run in a file (a job log may hold several), the ranks' hosts and devices, and the
// NCCL INFO lines that say what NCCL was told and what it picked (version, NCCL_* set by the
// environment, channels, the per-call algorithm and protocol of NCCL_DEBUG_SUBSYS=TUNING). From a
// run, `fit` draws the latency and bandwidth that `topo-aware calibrate` sets the cost model to.
//
// Formats, read from the sources rather than remembered:
// - nccl-tests (NVIDIA/nccl-tests, tags v2.9.0 .. v2.19.6): the results table of src/common.cu
//   (v2.9-v2.16: header printed by each test's *.cu; v2.10 "#   Rank %2d Pid ..." without Group,
//   "error" column as %5.0le; v2.13+ "#wrong", root column; v2.16+ "[%04x:%02x:%02x]" bus ids)
//   and src/util.cu (v2.17+: "# nccl-tests version", "# Collective test starting:", optional
//   per-iteration and timestamp columns). Values are "%7s"/"%6s" of getFloatStr (2, 1 or 0
//   decimals, else %e); "#wrong" is "N/A" without -c 1. Columns are found by the table header.
// - NCCL (NVIDIA/nccl, tags v2.18.6-1 .. v2.29.7-1): src/init.cc VERSION_STRING "NCCL version
//   2.x.y+cudaA.B", "%d coll channels, ..." (v2.18: without collnet), graph/rings.cc "Channel
//   %02d/%02d :", "<NAME> set by environment to <value>" (misc/param.cc adds a final '.'), and
//   the TUNING line of src/enqueue.cc, which took three forms (see TunedCall).
//
// Tolerant of what surrounds the output (job-log prefixes, other ranks' lines interleaved, prose
// around a pasted log); strict on a table row: a row that does not read is an error naming the
// file and line, so a calibration never rests on a silently skipped measurement. Errors are
// topology::Error, as in the rest of this library.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topoaware/mapper/busbw_model.h"

namespace topoaware::launch::nccltests {

enum class Test { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kSendRecv, kOther };

// "all_reduce", "reduce_scatter", "all_gather", "alltoall", "sendrecv", "other".
const char* to_string(Test t);
// The test of a binary or test name: "all_reduce_perf", "all_reduce_perf_mpi", "all_reduce" ->
// kAllReduce; anything else (broadcast_perf, reduce_perf, ...) -> kOther.
Test test_from_name(std::string_view name);

// "#  Rank  3 Group  0 Pid 12345 on host-a device  3 [0000:5d:00] NVIDIA H100 80GB HBM3".
struct RankLine {
  int rank = -1;
  std::string host;
  int device = -1;
  std::string bus_id;  // as printed between the brackets: "0000:5d:00", "0x5d"
  std::string gpu;     // the device name, "NVIDIA H100 80GB HBM3"
  int line = 0;        // 1-based line in the file
};

// One line of the results table.
struct Row {
  double bytes = 0;
  long long count = 0;
  std::string type, redop;  // redop empty where the test prints none (all_gather, alltoall)
  int root = -1;            // -1 where the test has no root or the table no root column
  double oop_time_us = 0, oop_algbw = 0, oop_busbw = 0;  // out of place (GB/s as nccl-tests prints)
  double ip_time_us = 0, ip_algbw = 0, ip_busbw = 0;     // in place (0 where N/A or nothing)
  int line = 0;
};

// One TUNING line: what NCCL picked for one call (printed by rank 0 only). Three forms in
// src/enqueue.cc:
//   2.20-2.22: "%ld Bytes -> Algo %d proto %d time %f"               (func empty; ids mapped to
//              names by NCCL's order: Tree Ring CollNetDirect CollNetChain NVLS NVLSTree PAT,
//              LL LL128 Simple)
//   2.23:      "%s: %ld Bytes -> Algo %d proto %d time %f"
//   2.24-2.29: "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}" (channels Hi-Lo+1;
//              "RING", "SIMPLE" there, stored as "Ring", "Simple" like the ids)
// and the symmetric kernels of 2.27+ (src/enqueue.cc, 2.28+ src/scheduler/symmetric_sched.cc):
//   "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d[ nWorks %d]"
//   (algo "Symmetric", kernel set, proto empty).
struct TunedCall {
  std::string func;  // "AllReduce", "AllGather", ... as NCCL names it; empty before 2.23
  double bytes = 0;
  std::string algo, proto;
  int channels = -1;    // -1 where the line does not say
  std::string kernel;   // symmetric kernels only
  double time_us = -1;  // NCCL's own estimate (2.20-2.23 lines), -1 where not printed
  int line = 0;
};

// One nccl-tests invocation found in a file.
struct Run {
  std::string source;
  int first_line = 0;  // the line that opened it (version, nThread, rank or table header)
  // From test_name; a log without one (nccl-tests before 2.17 prints none) is told by its table
  // where it can be: a reduction whose busbw is algbw x 2(n-1)/n is an all-reduce, x (n-1)/n a
  // reduce-scatter; all_gather and alltoall print the same factor and no redop: kOther.
  Test test = Test::kOther;
  std::string test_name;     // "all_reduce_perf" where the log says it (header or command line)
  std::string nccl_version;  // "2.18.3"; empty if the log does not say
  // Ranks of the run: the highest rank line + 1 (a log may show only some), else nThread x nGpus
  // where the header has them and there is one process (no rank lines), else 0.
  int nranks = 0;
  std::vector<RankLine> ranks;
  std::vector<Row> rows;
  std::vector<TunedCall> calls;
  std::map<std::string, std::string> nccl_env;  // "NCCL_ALGO" -> "Ring"
  int channels = -1;     // "N coll channels" (else the NN of "Channel xx/NN"), -1 if absent
  double avg_busbw = 0;  // "# Avg bus bandwidth : x"
};

// Every run in `text`. Throws topology::Error kBadInput naming "source:line" for a table row that
// does not read (a non-number where a number must be, too few columns), and naming `source` when
// the text holds no run at all. Lines it does not know are ignored.
std::vector<Run> parse(std::string_view text, const std::string& source);
// parse() of a file; kNotFound naming the path when it is absent, kSystem when it cannot be read.
std::vector<Run> read(const std::string& path);

// time_us = latency_us + bytes / (algbw_GBps * 1e3) fitted to a run's out-of-place rows (fit() in
// nccl_tests_log.cc says how the rows are weighted and why), and the run's plateau.
struct Fit {
  double latency_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;          // algbw_GBps x busbw_factor of the run
  double plateau_busbw_GBps = 0;  // median printed busbw of the rows at >= 1/4 of the largest size
  int points = 0;                 // rows the fit used
};
// Throws kBadInput naming the run's source:first_line with fewer than 2 rows of bytes > 0.
Fit fit(const Run& run);

// nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md and src/*.cu): 2(n-1)/n all_reduce,
// (n-1)/n reduce_scatter, all_gather and alltoall, 1 sendrecv and the rest; 0 when nranks < 1.
double busbw_factor(Test t, int nranks);

// The collective the cost model runs for a test (busbw_model.h): reduce_scatter as all_gather
// (NCCL tunes them alike), kOther as sendrecv (factor 1).
mapper::busbw::Collective model_collective(Test t);

}  // namespace topoaware::launch::nccltests

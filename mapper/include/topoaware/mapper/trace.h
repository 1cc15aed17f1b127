// Job traces for replaying a cluster (simulate.h): the jobs a cluster was asked to run, each a
// submit time, a run time and a GPU count, read from the public traces in ../shared/traces
// (Microsoft ITP via ElasticFlow, the Kalos converted subset) and from a site's own
// `sacct --parsable2` export.
//
// The readers are pure functions over the file's text; the caller reads the file and names it
// (`source`), and every error names source:line. What a trace holds that a replay cannot use is
// skipped and counted, never silently dropped: job steps and unfinished or GPU-less jobs of an
// sacct export. Times are seconds from the trace's own origin; jobs come back in submit order
// (stable: equal submits keep the file's order). Bad input throws Error (layout.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::mapper {

struct TraceJob {
  std::string id;
  double submit = 0;    // seconds from the trace's origin (sacct: its first submit)
  double duration = 0;  // run time in seconds, as it ran where it ran (> 0)
  int gpus = 0;         // GPUs it asked for (> 0)
};

enum class TraceFormat {
  kElasticFlow,  // job_id,submission_time,duration,num_gpu
  kKalos,        // job_id,arrival_time,num_iteration,...,gpu_workers,ps,gpu_per_worker,...
  kSacct,        // sacct --parsable2: '|'-separated, header line of field names
};
std::string_view to_string(TraceFormat f);  // "elasticflow", "kalos", "sacct"
// The format of a trace from its first line; throws Error naming source:1 when it is none.
TraceFormat detect_trace_format(std::string_view text, const std::string& source);
// From a name as the command line takes it; throws Error for an unknown name.
TraceFormat trace_format_from(std::string_view name);

struct Trace {
  std::vector<TraceJob> jobs;          // submit order
  std::size_t steps_skipped = 0;       // sacct: job steps (123.batch, 123.0, 123.extern)
  std::size_t unfinished_skipped = 0;  // sacct: no start or no end yet (pending, running)
  std::size_t no_gpu_skipped = 0;      // sacct: no gres/gpu in AllocTRES
};

// ElasticFlow's raw traces: header `job_id,submission_time,duration,num_gpu`, integer seconds
// and GPUs; the last line may lack its newline.
Trace read_elasticflow(std::string_view text, const std::string& source);

// The Kalos converted subset: arrival_time (s), duration = num_iteration x 0.5 s (the
// converter's rule, ../shared/traces/PROVENANCE.md), GPUs = gpu_workers x gpu_per_worker.
Trace read_kalos(std::string_view text, const std::string& source);

// `sacct --parsable2 --allocations` or without --allocations: fields by the header's names;
// JobID, Submit, Start, End and AllocTRES are needed (NNodes, State and others are ignored).
// Times as sacct prints them (YYYY-MM-DDTHH:MM:SS, read as UTC: only differences matter).
// GPUs: AllocTRES's gres/gpu=N (or gres/gpu:TYPE=N when there is no untyped count). A JobID
// with a '.' is a step (skipped, counted); a Start or End of Unknown/None, or an End before the
// Start, is unfinished (skipped, counted); a job with no GPU is skipped and counted. A job of
// zero run time is kept with 1 s.
Trace read_sacct(std::string_view text, const std::string& source);

// By format.
Trace read_trace(std::string_view text, const std::string& source, TraceFormat format);

}  // namespace topoaware::mapper

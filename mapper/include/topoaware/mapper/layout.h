// The job's parallel layout: dims (tensor/context/expert/data/pipeline), their sizes, order
// and traffic. One grammar for the CLI and the plugin:
//   tp=8,cp=2,ep=4,dp=auto,pp=4,order=tp-cp-ep-dp-pp   (Megatron's default order)
//   file:PATH                                           (TOML job description, read by the caller)
// Missing dims are 1, dp fills the rest, no spec means plain data parallel.
//
// Logical ranks follow the order: the first dim of `order` varies fastest (Megatron: tp is
// innermost, so tensor-parallel peers have consecutive ranks). A rank's coordinate in dim d is
// (rank / stride_d) % size_d with stride_d the product of the sizes of the dims before d.
//
// Traffic per dim is either given (bytes per step per rank, in the TOML description) or derived
// from model figures by default_traffic(), as the framework issues it (Megatron-core: sequence
// parallelism and the distributed optimizer make reduce-scatter + all-gather); docs/mapper.md,
// "What the framework runs", states the model and its sources. The mapper does no I/O:
// parse_job_toml() takes the file's text, the caller reads the file.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/mapper/nccl_model.h"

namespace topoaware::mapper {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The shape a dim's flows take over the hardware: a collective over the group (ring), every pair
// (all-to-all), stage to stage (pipeline).
enum class Pattern { kRing, kAllToAll, kPipeline };
std::string_view to_string(Pattern p);  // "ring", "all-to-all", "pipeline"

// What the framework issues for a dim (docs/mapper.md, "What the framework runs").
enum class Collective {
  kAllReduce,      // NCCL all-reduce: tp without sequence parallelism, dp without the
                   // distributed optimizer, a user dim
  kGather,         // reduce-scatter and all-gather (NCCL tunes both alike): tp with sequence
                   // parallelism, dp with the distributed optimizer
  kAllToAll,       // ep: token dispatch and combine
  kSendRecv,       // pp: activations to the next stage, gradients to the previous
  kRingExchange,   // cp: ring attention's send/recv of K and V to the next rank of the ring
};
// "all-reduce", "reduce-scatter+all-gather", "all-to-all", "send-recv", "ring-exchange"
std::string_view to_string(Collective c);
// The shape of a collective's flows.
Pattern pattern_of(Collective c);

struct Dim {
  std::string name;            // tp, cp, ep, dp, pp (or a user name)
  int size = 1;                // 0 while "auto"
  Pattern pattern = Pattern::kRing;   // = pattern_of(collective) once resolved
  // What it issues; empty: the framework's default for its name (tp, dp follow Framework).
  std::optional<Collective> collective;
  double bytes_per_step = 0;   // per rank per step; 0 = use the default model
  // Collective calls (ring, all-to-all) or send/recv rounds (pipeline) per step, for the
  // latency term; 0 = use the default model.
  double calls_per_step = 0;
};

// The model figures the default traffic follows from (docs/mapper.md, "Traffic model").
// Defaults describe a 70B-class dense transformer in bf16.
struct ModelFigures {
  double hidden = 8192;        // hidden size
  double layers = 80;          // transformer layers (all pipeline stages together)
  double seq_len = 4096;       // tokens per sequence
  double micro_batch = 1;      // sequences per micro-batch
  double micro_batches = 8;    // micro-batches per step (gradient accumulation)
  double dtype_bytes = 2;      // activations (bf16)
  double grad_bytes = 2;       // gradients reduced by dp (bf16)
  double experts = 0;          // MoE experts (0: dense)
  double topk = 2;             // experts per token
  // K and V width over the hidden size (grouped-query attention: 8 KV heads of 64 = 0.125, as
  // in the 70B-class models; 1 = multi-head): what ring attention passes around.
  double kv_fraction = 0.125;
  // Sustained training throughput of one GPU, TFLOP/s: what the compute the data-parallel
  // reduction overlaps takes (400: about 40% of an H100's 989 dense BF16, the model FLOPs
  // utilization Megatron-LM reports at scale).
  double gpu_tflops = 400;
  // Parameters per data-parallel bucket (Megatron-core's DDP bucket_size: 40M): the calls dp
  // makes, for the latency term.
  double bucket_params = 40e6;
};

// What the framework issues and overlaps, as Megatron-core's options name it. Defaults: what its
// large-model recipes run (NeMo's Llama 3 70B: sequence parallelism, the distributed optimizer,
// gradient-reduce and parameter-gather overlap all on).
struct Framework {
  bool sequence_parallel = true;      // --sequence-parallel: tp as reduce-scatter + all-gather
  bool distributed_optimizer = true;  // --use-distributed-optimizer: dp as reduce-scatter +
                                      // all-gather (gradients, then parameters)
  bool overlap_grad_reduce = true;    // --overlap-grad-reduce: dp's reduction overlaps backward
  bool overlap_param_gather = true;   // --overlap-param-gather: its gather overlaps forward
};

// Whether a group that fits a fast (NVLink) domain must stay inside one (the default, as
// Megatron's layout assumes: tp, then cp, then ep), or the cost model decides.
enum class SplitPolicy { kDomains, kAllow };
std::string_view to_string(SplitPolicy p);  // "domains", "allow"

// One entry of an explicit traffic matrix between logical ranks.
struct Flow {
  int from = 0;
  int to = 0;
  double bytes = 0;            // per step
};

struct Layout {
  std::vector<Dim> dims;       // innermost (fastest varying rank) first
  std::string spec;            // the text it came from
  ModelFigures model;          // for dims without explicit bytes
  Framework framework;
  SplitPolicy split = SplitPolicy::kDomains;  // spec key split=allow, TOML split = "allow"
  nccl::Version nccl;          // the NCCL release whose rules the cost model follows
  bool collnet = false;        // NCCL's CollNet (in-network reduction, SHARP) is enabled
  std::vector<Flow> matrix;    // explicit traffic, in addition to the dims' (TOML [[flow]])
};

// Parses a spec (not file:...); dp=auto resolves against `world` when world > 0. Besides dims
// and order: split=allow|domains, nccl=MAJOR.MINOR.
Layout parse_layout(std::string_view spec, int world = 0);
// Resolves auto sizes and checks the product divides `world`; throws Error with the numbers.
void resolve_layout(Layout& layout, int world);

// Parses a TOML job description (the text of file:PATH). `context` names the file in errors
// ("job.toml"). Grammar in docs/mapper.md; auto sizes resolve against `world` when world > 0.
Layout parse_job_toml(std::string_view text, const std::string& context, int world = 0);

// Product of the resolved sizes.
long long world_size(const Layout& layout);

// The traffic one dim carries, resolved: what the cost model uses.
struct DimTraffic {
  std::string name;
  int size = 1;
  long long stride = 1;        // rank distance between neighbours in this dim
  Pattern pattern = Pattern::kRing;          // pattern_of(collective)
  Collective collective = Collective::kAllReduce;
  double bytes = 0;            // per rank per step: the collectives' buffers (NCCL's nBytes:
                               // all-reduce buffer, all-gather output, reduce-scatter input)
                               // summed over calls; the message to each neighbour stage
                               // (pipeline) or to the ring's next rank (ring exchange)
  double calls = 0;            // collective calls / send-recv rounds per step
  // An all-reduce (collective == kAllReduce): NCCL may run it as a tree.
  bool all_reduce = false;
  // What the step waits for (docs/mapper.md, "What the step waits for"): the first
  // `hidden_share` of this dim's time runs behind `hidden_first_s` seconds of compute, the rest
  // behind `hidden_rest_s` (dp: the reduce-scatter behind the last micro-batch's backward, the
  // all-gather behind the first one's forward). 0 = on the critical path in full.
  double hidden_share = 1;
  double hidden_first_s = 0;
  double hidden_rest_s = 0;
};

// The part of `seconds` of dim `d`'s communication the step waits for.
double exposed_seconds(const DimTraffic& d, double seconds);

// Resolved traffic per dim of a resolved layout (explicit bytes win over the model).
std::vector<DimTraffic> default_traffic(const Layout& layout);

// "tp:3,pp:1,dp:2": the coordinates of a rank in every dim of size > 1 (dp always), in order.
std::vector<std::pair<std::string, int>> rank_coords(const Layout& layout, long long rank);

}  // namespace topoaware::mapper

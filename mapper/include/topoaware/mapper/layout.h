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
// from model figures by default_traffic(); docs/mapper.md states the model. The mapper does no
// I/O: parse_job_toml() takes the file's text, the caller reads the file.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topoaware::mapper {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

enum class Pattern { kRing, kAllToAll, kPipeline };
std::string_view to_string(Pattern p);  // "ring", "all-to-all", "pipeline"

struct Dim {
  std::string name;            // tp, cp, ep, dp, pp (or a user name)
  int size = 1;                // 0 while "auto"
  Pattern pattern = Pattern::kRing;
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
};

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
  std::vector<Flow> matrix;    // explicit traffic, in addition to the dims' (TOML [[flow]])
};

// Parses a spec (not file:...); dp=auto resolves against `world` when world > 0.
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
  Pattern pattern = Pattern::kRing;
  double bytes = 0;            // per rank per step: the collective's buffer (ring, all-to-all)
                               // or the message to each neighbour stage (pipeline)
  double calls = 0;            // collective calls / send-recv rounds per step
  // A ring dim that is an all-reduce (tp, dp, and any ring but cp, which passes K and V around
  // a ring): NCCL may run it as a tree (docs/mapper.md, "Which algorithm NCCL runs").
  bool all_reduce = false;
};

// Resolved traffic per dim of a resolved layout (explicit bytes win over the model).
std::vector<DimTraffic> default_traffic(const Layout& layout);

// "tp:3,pp:1,dp:2": the coordinates of a rank in every dim of size > 1 (dp always), in order.
std::vector<std::pair<std::string, int>> rank_coords(const Layout& layout, long long rank);

}  // namespace topoaware::mapper

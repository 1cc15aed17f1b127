// The job's parallel layout: dims (tensor/context/expert/data/pipeline), their sizes, order
// and traffic. One grammar for the CLI and the plugin:
//   tp=8,cp=2,ep=4,dp=auto,pp=4,order=tp-cp-ep-dp-pp   (Megatron's default order)
//   file:PATH                                           (TOML job description, read by the caller)
// Missing dims are 1, dp fills the rest, no spec means plain data parallel.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::mapper {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

enum class Pattern { kRing, kAllToAll, kPipeline };

struct Dim {
  std::string name;            // tp, cp, ep, dp, pp (or a user name)
  int size = 1;                // 0 while "auto"
  Pattern pattern = Pattern::kRing;
  double bytes_per_step = 0;   // per rank per step; 0 = use the default model
};

struct Layout {
  std::vector<Dim> dims;       // innermost (fastest varying rank) first
  std::string spec;            // the text it came from
};

// Parses a spec (not file:...); dp=auto resolves against `world` when world > 0.
Layout parse_layout(std::string_view spec, int world = 0);
// Resolves auto sizes and checks the product divides `world`; throws Error with the numbers.
void resolve_layout(Layout& layout, int world);

}  // namespace topoaware::mapper

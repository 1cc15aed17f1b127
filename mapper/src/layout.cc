// Layout spec grammar, size resolution and the default traffic model (docs/mapper.md).
#include "topoaware/mapper/layout.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

namespace topoaware::mapper {
namespace {

// Megatron's default rank order: tp innermost, pp outermost.
constexpr std::string_view kDefaultOrder[] = {"tp", "cp", "ep", "dp", "pp"};

Pattern default_pattern(std::string_view name) {
  if (name == "ep") return Pattern::kAllToAll;
  if (name == "pp") return Pattern::kPipeline;
  return Pattern::kRing;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  if (!(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = s.find(sep, start);
    out.push_back(trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kGather:
      return "reduce-scatter+all-gather";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kSendRecv:
      return "send-recv";
    case Collective::kRingExchange:
      return "ring-exchange";
  }
  return "all-reduce";
}

Pattern pattern_of(Collective c) {
  switch (c) {
    case Collective::kAllToAll:
      return Pattern::kAllToAll;
    case Collective::kSendRecv:
      return Pattern::kPipeline;
    default:
      return Pattern::kRing;
  }
}

std::string_view to_string(SplitPolicy p) { return p == SplitPolicy::kAllow ? "allow" : "domains"; }

double exposed_seconds(const DimTraffic& d, double seconds) {
  if (d.hidden_first_s <= 0 && d.hidden_rest_s <= 0) return seconds;
  const double first = seconds * d.hidden_share;
  return std::max(0.0, first - d.hidden_first_s) +
         std::max(0.0, seconds - first - d.hidden_rest_s);
}

std::string_view to_string(Pattern p) {
  switch (p) {
    case Pattern::kRing:
      return "ring";
    case Pattern::kAllToAll:
      return "all-to-all";
    case Pattern::kPipeline:
      return "pipeline";
  }
  return "ring";
}

Layout parse_layout(std::string_view spec, int world) {
  Layout layout;
  layout.spec = std::string(spec);
  std::string text = trim(spec);
  if (text.rfind("file:", 0) == 0) {
    throw Error("layout '" + text + "': file: specs are read by the caller (parse_job_toml)");
  }
  if (text.size() > 4096) throw Error("layout spec longer than 4096 characters");
  std::vector<std::pair<std::string, int>> sizes;  // in spec order; 0 = auto
  std::vector<std::string> order;
  bool have_order = false;
  if (!text.empty()) {
    for (const std::string& item : split(text, ',')) {
      if (item.empty()) throw Error("layout '" + text + "': empty item");
      auto eq = item.find('=');
      if (eq == std::string::npos) {
        throw Error("layout '" + text + "': '" + item + "' is not key=value");
      }
      std::string key = trim(std::string_view(item).substr(0, eq));
      std::string value = trim(std::string_view(item).substr(eq + 1));
      if (key == "split") {
        if (value == "allow") {
          layout.split = SplitPolicy::kAllow;
        } else if (value == "domains") {
          layout.split = SplitPolicy::kDomains;
        } else {
          throw Error("layout '" + text + "': split=" + value +
                      " (split=allow lets the cost model split groups that fit an NVLink "
                      "domain; split=domains, the default, keeps them whole)");
        }
        continue;
      }
      if (key == "nccl") {
        try {
          layout.nccl = nccl::parse_version(value);
        } catch (const Error& e) {
          throw Error("layout '" + text + "': nccl=" + value + ": " + e.what());
        }
        continue;
      }
      if (key == "order") {
        if (have_order) throw Error("layout '" + text + "': order given twice");
        have_order = true;
        order = split(value, '-');
        for (const auto& n : order) {
          if (!valid_name(n))
            throw Error("layout '" + text + "': bad dim name '" + n + "' in order");
        }
        continue;
      }
      if (!valid_name(key)) throw Error("layout '" + text + "': bad dim name '" + key + "'");
      for (const auto& [n, s] : sizes) {
        if (n == key) throw Error("layout '" + text + "': " + key + " given twice");
      }
      int size = 0;
      if (value != "auto") {
        auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), size);
        if (ec != std::errc() || ptr != value.data() + value.size() || size < 1 ||
            size > (1 << 22)) {
          throw Error("layout '" + text + "': " + key + "=" + value +
                      " is not a size (a positive integer or auto)");
        }
      }
      sizes.emplace_back(key, size);
    }
  }
  // The dims, in rank order: the given order, else Megatron's with user dims after dp.
  std::vector<std::string> names;
  if (have_order) {
    std::set<std::string> seen;
    for (const auto& n : order) {
      if (!seen.insert(n).second) throw Error("layout '" + text + "': " + n + " twice in order");
      names.push_back(n);
    }
    for (const auto& [n, s] : sizes) {
      if (!seen.count(n)) {
        throw Error("layout '" + text + "': " + n + " is not in order=" + [&] {
          std::string o;
          for (const auto& x : order) o += (o.empty() ? "" : "-") + x;
          return o;
        }());
      }
    }
    // Standard dims missing from an explicit order are size 1; appending them keeps ranks.
    for (auto d : kDefaultOrder) {
      if (!seen.count(std::string(d))) names.emplace_back(d);
    }
  } else {
    for (auto d : kDefaultOrder) {
      names.emplace_back(d);
      if (d == "dp") {
        for (const auto& [n, s] : sizes) {
          if (std::find(std::begin(kDefaultOrder), std::end(kDefaultOrder), n) ==
              std::end(kDefaultOrder)) {
            names.push_back(n);
          }
        }
      }
    }
  }
  bool any_auto = false;
  for (const auto& [n, s] : sizes) any_auto |= (s == 0);
  for (const auto& n : names) {
    Dim d;
    d.name = n;
    d.pattern = default_pattern(n);
    auto it = std::find_if(sizes.begin(), sizes.end(), [&](const auto& p) { return p.first == n; });
    if (it != sizes.end()) {
      d.size = it->second;
    } else {
      // dp fills the rest unless another dim is auto already.
      d.size = (n == "dp" && !any_auto) ? 0 : 1;
    }
    layout.dims.push_back(d);
  }
  int autos = 0;
  for (const auto& d : layout.dims) autos += d.size == 0;
  if (autos > 1) throw Error("layout '" + text + "': more than one dim is auto");
  if (world > 0) resolve_layout(layout, world);
  return layout;
}

long long world_size(const Layout& layout) {
  long long w = 1;
  for (const auto& d : layout.dims) w *= std::max(d.size, 1);
  return w;
}

void resolve_layout(Layout& layout, int world) {
  if (world <= 0) throw Error("layout: the step has no slots");
  std::string fixed_names;
  long long fixed = 1;
  Dim* auto_dim = nullptr;
  for (auto& d : layout.dims) {
    if (d.size == 0) {
      if (auto_dim) throw Error("layout: more than one dim is auto");
      auto_dim = &d;
      continue;
    }
    fixed_names += (fixed_names.empty() ? "" : "*") + d.name;
    fixed *= d.size;
    if (fixed > (1LL << 40)) throw Error("layout: product of sizes is absurdly large");
  }
  if (auto_dim) {
    if (world % fixed != 0) {
      throw Error(fixed_names + " = " + std::to_string(fixed) + " does not divide " +
                  std::to_string(world) + " slots");
    }
    auto_dim->size = static_cast<int>(world / fixed);
  } else if (fixed != world) {
    if (world % fixed != 0) {
      throw Error(fixed_names + " = " + std::to_string(fixed) + " does not divide " +
                  std::to_string(world) + " slots");
    }
    throw Error(fixed_names + " = " + std::to_string(fixed) + " but the step has " +
                std::to_string(world) + " slots (give one dim as auto to fill them)");
  }
  for (const auto& f : layout.matrix) {
    if (f.from < 0 || f.to < 0 || f.from >= world || f.to >= world) {
      throw Error("traffic matrix: flow " + std::to_string(f.from) + "->" + std::to_string(f.to) +
                  " names a rank outside 0.." + std::to_string(world - 1));
    }
  }
}

namespace {

// A dim's collective where the description does not name one: by its name, as Megatron-core
// issues it under the framework's options; a user dim by its pattern.
Collective default_collective(const Dim& d, const Framework& fw) {
  if (d.collective) return *d.collective;
  if (d.name == "tp") return fw.sequence_parallel ? Collective::kGather : Collective::kAllReduce;
  if (d.name == "dp") {
    return fw.distributed_optimizer ? Collective::kGather : Collective::kAllReduce;
  }
  if (d.name == "cp") return Collective::kRingExchange;
  switch (d.pattern) {
    case Pattern::kAllToAll:
      return Collective::kAllToAll;
    case Pattern::kPipeline:
      return Collective::kSendRecv;
    case Pattern::kRing:
      break;
  }
  return Collective::kAllReduce;
}

}  // namespace

std::vector<DimTraffic> default_traffic(const Layout& layout) {
  const ModelFigures& m = layout.model;
  const Framework& fw = layout.framework;
  auto size_of = [&](std::string_view n) {
    for (const auto& d : layout.dims) {
      if (d.name == n) return static_cast<double>(std::max(d.size, 1));
    }
    return 1.0;
  };
  const double tp = size_of("tp"), cp = size_of("cp"), ep = size_of("ep"), pp = size_of("pp");
  // One micro-batch's activations on one rank (its 1/cp of the sequence), and the layers one
  // pipeline stage holds.
  const double tokens = m.micro_batch * m.seq_len / cp;
  const double act = tokens * m.hidden * m.dtype_bytes;
  const double stage_layers = std::max(1.0, m.layers / pp);
  const double mb = std::max(1.0, m.micro_batches);
  // Parameters a rank holds (4h^2 attention + 8h^2 MLP a layer, the MLP once per expert it
  // holds) and those a token passes through (topk experts), over tensor parallelism.
  const double experts_here = m.experts > 0 ? std::max(1.0, m.experts / ep) : 1.0;
  const double h2 = m.hidden * m.hidden;
  const double params = stage_layers * h2 * (4 + 8 * experts_here) / tp;
  const double active = stage_layers * h2 * (4 + 8 * (m.experts > 0 ? m.topk : 1.0)) / tp;
  // One micro-batch's forward on one rank: 2 FLOPs a parameter a token, plus causal attention's
  // 2 s^2 h a layer (QK^T and AV halved) over its heads (tp) and queries (cp). Backward twice that.
  const double forward_flops =
      2 * active * tokens + 2 * stage_layers * tokens * m.seq_len * m.hidden / tp;
  const double forward_s = forward_flops / (std::max(1e-3, m.gpu_tflops) * 1e12);
  const double backward_s = 2 * forward_s;
  std::vector<DimTraffic> out;
  long long stride = 1;
  for (const auto& d : layout.dims) {
    const int size = std::max(d.size, 1);
    const Collective collective = default_collective(d, fw);
    const bool gather = collective == Collective::kGather;
    double hidden_share = 1, hidden_first_s = 0, hidden_rest_s = 0;
    double bytes = 0, calls = 0;
    if (d.name == "tp") {
      // Per layer and micro-batch of the rank's activations: two all-reduces forward and two
      // backward; with sequence parallelism two all-gathers and two reduce-scatters forward, the
      // same backward and two more all-gathers of the inputs for the weight gradients
      // (Megatron-core tensor_parallel/layers.py). Each call's buffer is `act`.
      calls = (gather ? 10 : 4) * stage_layers * mb;
      bytes = calls * act;
    } else if (d.name == "cp") {
      // Ring attention (Transformer Engine's P2P context parallelism): cp-1 rounds forward
      // passing K and V to the next rank, cp-1 backward passing K, V and their gradients.
      const double kv = 2 * act * m.kv_fraction / tp;
      calls = 2 * (cp - 1) * stage_layers * mb;
      bytes = 3 * (cp - 1) * kv * stage_layers * mb;
    } else if (d.name == "ep") {
      // Dispatch and combine, forward and backward, of topk copies of the rank's tokens.
      bytes = 4 * stage_layers * mb * std::max(1.0, m.topk) * act / tp;
      calls = 4 * stage_layers * mb;
    } else if (d.name == "dp") {
      // The rank's gradients, reduced once a step in buckets: a reduce-scatter of the gradients
      // and an all-gather of the updated (bf16) parameters with the distributed optimizer, an
      // all-reduce of the gradients without it.
      const double buckets = std::ceil(params / std::max(1.0, m.bucket_params));
      bytes = params * (m.grad_bytes + (gather ? m.dtype_bytes : 0.0));
      calls = buckets * (gather ? 2 : 1);
      // What it overlaps: the reduction the last micro-batch's backward, the gather the next
      // step's first forward (Megatron-core distributed/param_and_grad_buffer.py).
      hidden_share = gather ? m.grad_bytes / (m.grad_bytes + m.dtype_bytes) : 1.0;
      hidden_first_s = fw.overlap_grad_reduce ? backward_s : 0.0;
      hidden_rest_s = gather && fw.overlap_param_gather ? forward_s : 0.0;
    } else if (d.name == "pp") {
      // Activations forward and their gradients backward, once per micro-batch each way: the
      // sequence-parallel shard with sequence parallelism, the tensor's 1/tp share of it
      // (scatter-gather) without.
      bytes = mb * act / tp;
      calls = mb;
    } else {
      // A user dim without figures: one activation-sized collective per layer and micro-batch.
      bytes = stage_layers * mb * act / tp;
      calls = stage_layers * mb;
    }
    // Built whole, not field by field into a default-constructed one: GCC 16 took the latter
    // for a read of an uninitialized `pattern` (-Wmaybe-uninitialized, an error under -Werror).
    if (d.bytes_per_step > 0) bytes = d.bytes_per_step;
    out.push_back(DimTraffic{.name = d.name,
                             .size = size,
                             .stride = stride,
                             .pattern = pattern_of(collective),
                             .collective = collective,
                             .bytes = size == 1 ? 0 : bytes,
                             .calls = d.calls_per_step > 0 ? d.calls_per_step
                                                           : std::max(1.0, calls),
                             .all_reduce = collective == Collective::kAllReduce,
                             .hidden_share = hidden_share,
                             .hidden_first_s = hidden_first_s,
                             .hidden_rest_s = hidden_rest_s});
    stride *= size;
  }
  return out;
}

std::vector<std::pair<std::string, int>> rank_coords(const Layout& layout, long long rank) {
  std::vector<std::pair<std::string, int>> out;
  long long stride = 1;
  for (const auto& d : layout.dims) {
    int size = std::max(d.size, 1);
    if (size > 1 || d.name == "dp") {
      out.emplace_back(d.name, static_cast<int>((rank / stride) % size));
    }
    stride *= size;
  }
  return out;
}

}  // namespace topoaware::mapper

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

std::vector<DimTraffic> default_traffic(const Layout& layout) {
  const ModelFigures& m = layout.model;
  auto size_of = [&](std::string_view n) {
    for (const auto& d : layout.dims) {
      if (d.name == n) return static_cast<double>(std::max(d.size, 1));
    }
    return 1.0;
  };
  const double tp = size_of("tp"), cp = size_of("cp"), ep = size_of("ep"), pp = size_of("pp");
  // One micro-batch's activation tensor, and the layers one pipeline stage holds.
  const double act = m.micro_batch * m.seq_len * m.hidden * m.dtype_bytes;
  const double stage_layers = std::max(1.0, m.layers / pp);
  const double mb = std::max(1.0, m.micro_batches);
  std::vector<DimTraffic> out;
  long long stride = 1;
  for (const auto& d : layout.dims) {
    double bytes = 0, calls = 0;
    if (d.name == "tp") {
      // Two all-reduces (or reduce-scatter + all-gather) forward and two backward per layer,
      // of this rank's share of the sequence.
      bytes = 4 * stage_layers * mb * act / cp;
      calls = 4 * stage_layers * mb;
    } else if (d.name == "cp") {
      // Ring attention passes K and V around forward and their gradients backward.
      bytes = 2 * stage_layers * mb * act / tp;
      calls = 2 * stage_layers * mb;
    } else if (d.name == "ep") {
      // Dispatch and combine, forward and backward, of topk copies of the local tokens.
      bytes = 4 * stage_layers * mb * std::max(1.0, m.topk) * act / (tp * cp);
      calls = 4 * stage_layers * mb;
    } else if (d.name == "dp") {
      // One gradient all-reduce of the rank's parameters: 4h^2 attention + 8h^2 MLP per layer,
      // MLP multiplied by the experts this rank holds.
      double experts_here = m.experts > 0 ? std::max(1.0, m.experts / ep) : 1.0;
      double params = stage_layers * m.hidden * m.hidden * (4 + 8 * experts_here) / tp;
      bytes = params * m.grad_bytes;
      calls = 1;
    } else if (d.name == "pp") {
      // Activations forward and their gradients backward, once per micro-batch each way.
      bytes = mb * act / (tp * cp);
      calls = mb;
    } else {
      // A user dim without figures: one activation-sized all-reduce per layer and micro-batch.
      bytes = stage_layers * mb * act / (tp * cp);
      calls = stage_layers * mb;
    }
    // Built whole, not field by field into a default-constructed one: GCC 16 took the latter
    // for a read of an uninitialized `pattern` (-Wmaybe-uninitialized, an error under -Werror).
    const int size = std::max(d.size, 1);
    if (d.bytes_per_step > 0) bytes = d.bytes_per_step;
    out.push_back(DimTraffic{.name = d.name,
                             .size = size,
                             .stride = stride,
                             .pattern = d.pattern,
                             .bytes = size == 1 ? 0 : bytes,
                             .calls = d.calls_per_step > 0 ? d.calls_per_step : calls,
                             .all_reduce = d.pattern == Pattern::kRing && d.name != "cp"});
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

// The TOML job description (`--layout file:PATH`): dims with sizes, patterns and traffic, model
// figures, and an optional explicit traffic matrix. Parsed from text; the caller reads the file.
#include <toml++/toml.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {
namespace {

std::string at(const std::string& context, const toml::node& node) {
  const auto& src = node.source();
  if (src.begin.line == 0) return context;
  return context + ":" + std::to_string(src.begin.line);
}

double number(const std::string& context, const toml::node& node, const char* key, double lo,
              double hi) {
  std::optional<double> v = node.value<double>();
  if (!v || !std::isfinite(*v) || *v < lo || *v > hi) {
    std::ostringstream msg;
    msg << at(context, node) << ": " << key << " must be a number in [" << lo << ", " << hi << "]";
    throw Error(msg.str());
  }
  return *v;
}

// `pattern`, the older key: the collective each shape stood for.
Collective pattern_key(const std::string& context, const toml::node& node) {
  std::optional<std::string> s = node.value<std::string>();
  if (s == "ring" || s == "all-reduce" || s == "allreduce") return Collective::kAllReduce;
  if (s == "all-to-all" || s == "alltoall" || s == "a2a") return Collective::kAllToAll;
  if (s == "pipeline" || s == "p2p" || s == "send-recv") return Collective::kSendRecv;
  throw Error(at(context, node) + ": pattern must be ring, all-to-all or pipeline");
}

Collective collective_key(const std::string& context, const toml::node& node) {
  std::optional<std::string> s = node.value<std::string>();
  if (s == "all-reduce") return Collective::kAllReduce;
  if (s == "reduce-scatter+all-gather" || s == "all-gather" || s == "reduce-scatter") {
    return Collective::kGather;
  }
  if (s == "all-to-all") return Collective::kAllToAll;
  if (s == "send-recv") return Collective::kSendRecv;
  if (s == "ring-exchange") return Collective::kRingExchange;
  throw Error(at(context, node) +
              ": collective must be all-reduce, reduce-scatter+all-gather (or all-gather, "
              "reduce-scatter), all-to-all, send-recv or ring-exchange");
}

bool flag(const std::string& context, const toml::node& node, const std::string& key) {
  // is_boolean: value<bool>() would take an integer too.
  if (!node.is_boolean()) throw Error(at(context, node) + ": " + key + " must be true or false");
  return *node.value<bool>();
}

}  // namespace

Layout parse_job_toml(std::string_view text, const std::string& context, int world) {
  if (text.size() > (16u << 20)) throw Error(context + ": job description larger than 16 MiB");
  toml::table doc;
  try {
    doc = toml::parse(text, context);
  } catch (const toml::parse_error& e) {
    throw Error(context + ":" + std::to_string(e.source().begin.line) + ": " +
                std::string(e.description()));
  }
  static const char* kTop[] = {"layout", "order", "model", "dims", "flow", "split", "framework",
                               "nccl"};
  for (const auto& [k, v] : doc) {
    bool known = false;
    for (const char* t : kTop) known |= (k.str() == t);
    if (!known) throw Error(at(context, v) + ": unknown key '" + std::string(k.str()) + "'");
  }
  // Sizes come from `layout` (the spec grammar) and from [dims.X].size; both for one dim is an
  // error, so there is one source of truth per number.
  std::string spec;
  if (const toml::node* n = doc.get("layout")) {
    auto s = n->value<std::string>();
    if (!s) throw Error(at(context, *n) + ": layout must be a string like \"tp=8,pp=4\"");
    spec = *s;
  }
  const toml::table* dims = nullptr;
  if (const toml::node* n = doc.get("dims")) {
    dims = n->as_table();
    if (!dims) throw Error(at(context, *n) + ": dims must be a table of [dims.NAME]");
    for (const auto& [k, v] : *dims) {
      const toml::table* d = v.as_table();
      if (!d) throw Error(at(context, v) + ": dims." + std::string(k.str()) + " must be a table");
      if (const toml::node* s = d->get("size")) {
        std::string size;
        if (auto str = s->value<std::string>(); str && *str == "auto") {
          size = "auto";
        } else {
          size = std::to_string(static_cast<long long>(number(context, *s, "size", 1, 1 << 22)));
        }
        if (spec.find(std::string(k.str()) + "=") != std::string::npos) {
          throw Error(at(context, *s) + ": size of " + std::string(k.str()) +
                      " given in both layout and dims");
        }
        spec += (spec.empty() ? "" : ",") + std::string(k.str()) + "=" + size;
      }
    }
  }
  if (const toml::node* n = doc.get("order")) {
    auto s = n->value<std::string>();
    if (!s) throw Error(at(context, *n) + ": order must be a string like \"tp-cp-ep-dp-pp\"");
    spec += (spec.empty() ? "" : ",") + std::string("order=") + *s;
  }
  Layout layout;
  try {
    layout = parse_layout(spec, 0);
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
  layout.spec = "file:" + context;
  if (dims) {
    for (const auto& [k, v] : *dims) {
      const toml::table& d = *v.as_table();
      Dim* dim = nullptr;
      for (auto& x : layout.dims) {
        if (x.name == k.str()) dim = &x;
      }
      if (!dim) throw Error(at(context, v) + ": dims." + std::string(k.str()) + " has no size");
      for (const auto& [dk, dv] : d) {
        std::string key(dk.str());
        if (key == "size") continue;
        if (key == "pattern") {
          if (d.get("collective")) {
            throw Error(at(context, dv) + ": dims." + std::string(k.str()) +
                        " gives both pattern and collective (collective says more)");
          }
          dim->collective = pattern_key(context, dv);
          dim->pattern = pattern_of(*dim->collective);
        } else if (key == "collective") {
          dim->collective = collective_key(context, dv);
          dim->pattern = pattern_of(*dim->collective);
        } else if (key == "bytes_per_step") {
          dim->bytes_per_step = number(context, dv, "bytes_per_step", 0, 1e18);
        } else if (key == "calls_per_step") {
          dim->calls_per_step = number(context, dv, "calls_per_step", 0, 1e9);
        } else {
          throw Error(at(context, dv) + ": unknown key dims." + std::string(k.str()) + "." + key);
        }
      }
    }
  }
  if (const toml::node* n = doc.get("model")) {
    const toml::table* m = n->as_table();
    if (!m) throw Error(at(context, *n) + ": model must be a table");
    ModelFigures& f = layout.model;
    for (const auto& [k, v] : *m) {
      std::string key(k.str());
      if (key == "hidden")
        f.hidden = number(context, v, "hidden", 1, 1e7);
      else if (key == "layers")
        f.layers = number(context, v, "layers", 1, 1e5);
      else if (key == "seq_len")
        f.seq_len = number(context, v, "seq_len", 1, 1e9);
      else if (key == "micro_batch")
        f.micro_batch = number(context, v, "micro_batch", 1, 1e6);
      else if (key == "micro_batches")
        f.micro_batches = number(context, v, "micro_batches", 1, 1e6);
      else if (key == "dtype_bytes")
        f.dtype_bytes = number(context, v, "dtype_bytes", 0.5, 8);
      else if (key == "grad_bytes")
        f.grad_bytes = number(context, v, "grad_bytes", 0.5, 8);
      else if (key == "experts")
        f.experts = number(context, v, "experts", 0, 1e6);
      else if (key == "topk")
        f.topk = number(context, v, "topk", 1, 1e3);
      else if (key == "kv_fraction")
        f.kv_fraction = number(context, v, "kv_fraction", 1e-3, 1);
      else if (key == "gpu_tflops")
        f.gpu_tflops = number(context, v, "gpu_tflops", 1e-3, 1e6);
      else if (key == "bucket_params")
        f.bucket_params = number(context, v, "bucket_params", 1, 1e13);
      else if (key == "dtype") {
        auto s = v.value<std::string>();
        if (s == "bf16" || s == "fp16")
          f.dtype_bytes = 2;
        else if (s == "fp32")
          f.dtype_bytes = 4;
        else if (s == "fp8")
          f.dtype_bytes = 1;
        else
          throw Error(at(context, v) + ": dtype must be bf16, fp16, fp32 or fp8");
      } else {
        throw Error(at(context, v) + ": unknown key model." + key);
      }
    }
  }
  if (const toml::node* n = doc.get("split")) {
    auto v = n->value<std::string>();
    if (v == "allow") {
      layout.split = SplitPolicy::kAllow;
    } else if (v == "domains") {
      layout.split = SplitPolicy::kDomains;
    } else {
      throw Error(at(context, *n) + ": split must be \"domains\" (groups that fit an NVLink "
                                    "domain stay in one) or \"allow\"");
    }
  }
  if (const toml::node* n = doc.get("framework")) {
    const toml::table* t = n->as_table();
    if (!t) throw Error(at(context, *n) + ": framework must be a table");
    Framework& fw = layout.framework;
    for (const auto& [k, v] : *t) {
      const std::string key(k.str());
      if (key == "sequence_parallel")
        fw.sequence_parallel = flag(context, v, key);
      else if (key == "distributed_optimizer")
        fw.distributed_optimizer = flag(context, v, key);
      else if (key == "overlap_grad_reduce")
        fw.overlap_grad_reduce = flag(context, v, key);
      else if (key == "overlap_param_gather")
        fw.overlap_param_gather = flag(context, v, key);
      else
        throw Error(at(context, v) + ": unknown key framework." + key);
    }
  }
  if (const toml::node* n = doc.get("nccl")) {
    const toml::table* t = n->as_table();
    if (!t) throw Error(at(context, *n) + ": nccl must be a table");
    for (const auto& [k, v] : *t) {
      const std::string key(k.str());
      if (key == "version") {
        auto s = v.value<std::string>();
        if (!s) throw Error(at(context, v) + ": nccl.version must be a string like \"2.27\"");
        try {
          layout.nccl = nccl::parse_version(*s);
        } catch (const Error& e) {
          throw Error(at(context, v) + ": " + e.what());
        }
      } else if (key == "collnet") {
        layout.collnet = flag(context, v, key);
      } else {
        throw Error(at(context, v) + ": unknown key nccl." + key);
      }
    }
  }
  if (const toml::node* n = doc.get("flow")) {
    const toml::array* flows = n->as_array();
    if (!flows) throw Error(at(context, *n) + ": flow must be an array of tables ([[flow]])");
    if (flows->size() > 4'000'000) throw Error(at(context, *n) + ": more than 4M flows");
    for (const auto& e : *flows) {
      const toml::table* t = e.as_table();
      if (!t) throw Error(at(context, e) + ": each [[flow]] must be a table");
      Flow f;
      bool have[3] = {false, false, false};
      for (const auto& [k, v] : *t) {
        std::string key(k.str());
        if (key == "from")
          f.from = static_cast<int>(number(context, v, "from", 0, 1 << 24)), have[0] = true;
        else if (key == "to")
          f.to = static_cast<int>(number(context, v, "to", 0, 1 << 24)), have[1] = true;
        else if (key == "bytes")
          f.bytes = number(context, v, "bytes", 0, 1e18), have[2] = true;
        else
          throw Error(at(context, v) + ": unknown key flow." + key);
      }
      if (!have[0] || !have[1] || !have[2]) {
        throw Error(at(context, e) + ": a flow needs from, to and bytes");
      }
      layout.matrix.push_back(f);
    }
  }
  if (world > 0) {
    try {
      resolve_layout(layout, world);
    } catch (const Error& e) {
      throw Error(context + ": " + e.what());
    }
  }
  return layout;
}

}  // namespace topoaware::mapper

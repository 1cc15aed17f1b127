// The fast-domain rule (domains.h).
#include "domains.h"

#include <algorithm>
#include <map>
#include <string>

#include "routing.h"

namespace topoaware::mapper::internal {
namespace {

// The fast dims in the order the rule keeps them whole (Megatron's tp, cp, ep), by index.
std::vector<std::size_t> fast_dims(const Traffic& t) {
  std::vector<std::size_t> out;
  for (const char* name : {"tp", "cp", "ep"}) {
    for (std::size_t d = 0; d < t.dims.size(); ++d) {
      if (t.dims[d].name == name && t.dims[d].size > 1) out.push_back(d);
    }
  }
  return out;
}

// Slots per island (NCCL node) of the step.
std::map<std::uint32_t, long long> island_slots(const Machine& m) {
  std::map<std::uint32_t, long long> out;
  for (const Slot& s : m.slots) ++out[nccl_node(m, s.host)];
  return out;
}

// Each member of the block with first rank `base`: base plus every combination of the level's
// coordinates.
template <class F>
void for_members(const Traffic& t, const DomainLevel& level, long long base, F&& f) {
  std::vector<long long> digit(level.dims.size(), 0);
  for (long long k = 0; k < level.unit; ++k) {
    long long r = base;
    for (std::size_t i = 0; i < level.dims.size(); ++i) r += digit[i] * t.dims[level.dims[i]].stride;
    f(r);
    for (std::size_t i = 0; i < level.dims.size(); ++i) {
      if (++digit[i] < t.dims[level.dims[i]].size) break;
      digit[i] = 0;
    }
  }
}

}  // namespace

DomainRule::DomainRule(const Machine& m, const Traffic& t, SplitPolicy policy) : t_(&t) {
  island_.resize(m.slots.size());
  for (std::uint32_t s = 0; s < m.slots.size(); ++s) island_[s] = nccl_node(m, m.slots[s].host);
  if (policy == SplitPolicy::kAllow) return;
  const auto slots = island_slots(m);
  DomainLevel level;
  for (std::size_t d : fast_dims(t)) {
    level.dims.push_back(d);
    level.unit *= t.dims[d].size;
    level.blocks = t.world / level.unit;
    long long fit = 0;
    for (const auto& [island, count] : slots) fit += count / level.unit;
    level.required = std::min(level.blocks, fit);
    if (level.required == 0) break;  // larger blocks fit no better
    levels_.push_back(level);
  }
}

long long DomainRule::base(std::size_t level, long long rank) const {
  long long b = rank;
  for (std::size_t d : levels_[level].dims) {
    const DimTraffic& dt = t_->dims[d];
    b -= (rank / dt.stride) % dt.size * dt.stride;
  }
  return b;
}

bool DomainRule::whole(std::size_t level, long long rank,
                       const std::vector<std::uint32_t>& a) const {
  const long long b = base(level, rank);
  const std::uint32_t island = island_[a[static_cast<std::size_t>(b)]];
  bool same = true;
  for_members(*t_, levels_[level], b, [&](long long r) {
    same = same && island_[a[static_cast<std::size_t>(r)]] == island;
  });
  return same;
}

long long DomainRule::shortfall(const std::vector<std::uint32_t>& a) const {
  long long short_by = 0;
  for (std::size_t l = 0; l < levels_.size(); ++l) {
    long long whole_blocks = 0;
    for (long long r = 0; r < t_->world; ++r) {
      if (base(l, r) == r && whole(l, r, a)) ++whole_blocks;
    }
    short_by += std::max(0LL, levels_[l].required - whole_blocks);
  }
  return short_by;
}

DomainTracker::DomainTracker(const DomainRule& rule, const std::vector<std::uint32_t>& a)
    : rule_(rule) {
  const auto& levels = rule.levels();
  whole_.assign(levels.size(), 0);
  is_whole_.assign(levels.size(), std::vector<char>(a.size(), 0));
  for (std::size_t l = 0; l < levels.size(); ++l) {
    for (long long r = 0; r < static_cast<long long>(a.size()); ++r) {
      if (rule.base(l, r) != r) continue;
      const bool w = rule.whole(l, r, a);
      is_whole_[l][static_cast<std::size_t>(r)] = w;
      whole_[l] += w;
    }
  }
}

long long DomainTracker::shortfall() const {
  long long short_by = 0;
  for (std::size_t l = 0; l < whole_.size(); ++l) {
    short_by += std::max(0LL, rule_.levels()[l].required - whole_[l]);
  }
  return short_by;
}

void DomainTracker::exchanged(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs,
                              const std::vector<std::uint32_t>& a) {
  journal_.clear();
  saved_whole_ = whole_;
  for (std::size_t l = 0; l < whole_.size(); ++l) {
    for (const auto& [x, y] : pairs) {
      for (long long r : {static_cast<long long>(x), static_cast<long long>(y)}) {
        const long long b = rule_.base(l, r);
        char& flag = is_whole_[l][static_cast<std::size_t>(b)];
        const char now = rule_.whole(l, b, a);
        if (now == flag) continue;
        journal_.push_back({l, b, flag});
        whole_[l] += now - flag;
        flag = now;
      }
    }
  }
}

void DomainTracker::undo() {
  for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) {
    is_whole_[it->level][static_cast<std::size_t>(it->base)] = it->was;
  }
  if (!saved_whole_.empty()) whole_ = saved_whole_;
  journal_.clear();
}

std::vector<SplitReport> domain_splits(const Machine& m, const Traffic& t, SplitPolicy policy,
                                       const std::vector<std::uint32_t>& a) {
  std::vector<SplitReport> out;
  const DomainRule rule(m, t, SplitPolicy::kDomains);
  const auto slots = island_slots(m);
  long long largest = 0;
  for (const auto& [island, count] : slots) largest = std::max(largest, count);
  const bool domains = std::any_of(m.domain_of_host.begin(), m.domain_of_host.end(),
                                   [](int d) { return d >= 0; });
  const std::string place = domains ? "NVLink domain" : "host";
  long long unit = 1;
  std::string prefix;
  for (std::size_t d : fast_dims(t)) {
    const DimTraffic& dt = t.dims[d];
    unit *= dt.size;
    prefix += (prefix.empty() ? "" : " x ") + dt.name;
    SplitReport s;
    s.dim = dt.name;
    s.place = place;
    const long long block = dt.stride * dt.size;
    for (long long outer = 0; outer < t.world; outer += block) {
      for (long long inner = 0; inner < dt.stride; ++inner) {
        ++s.groups;
        const std::uint32_t first = rule.island_of_slot(a[static_cast<std::size_t>(outer + inner)]);
        for (long long i = 1; i < dt.size; ++i) {
          const auto r = static_cast<std::size_t>(outer + inner + i * dt.stride);
          if (rule.island_of_slot(a[r]) != first) {
            ++s.split;
            break;
          }
        }
      }
    }
    long long fit = 0;
    for (const auto& [island, count] : slots) fit += count / unit;
    const long long blocks = t.world / unit;
    // A block of the prefix that cannot be whole splits every group of this dim in it (its
    // lower dims' groups being whole): unit / size groups a block.
    s.forced = std::min(s.split, std::max(0LL, blocks - fit) * (unit / dt.size));
    if (s.split > 0) {
      if (unit > largest) {
        s.why = prefix + " = " + std::to_string(unit) + " ranks do not fit the largest " + place +
                " of the step (" + std::to_string(largest) + " GPUs)";
      } else if (fit < blocks) {
        s.why = "the step's " + place + "s hold " + std::to_string(fit) + " of its " +
                std::to_string(blocks) + " blocks of " + prefix + " whole (they lend GPUs in " +
                "counts that are no multiple of " + std::to_string(unit) + ")";
      } else if (policy == SplitPolicy::kAllow) {
        s.why = "split=allow: the cost model chose to split";
      } else {
        s.why = "no plan the search found kept them whole (the request's GPU binding or "
                "per-node launcher may not allow it)";
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace topoaware::mapper::internal

namespace topoaware::mapper {

long long rule_shortfall(const Machine& machine, const Traffic& traffic,
                         const std::vector<std::uint32_t>& slot_of_rank) {
  const internal::DomainRule rule(machine, traffic, traffic.split);
  return rule.shortfall(slot_of_rank);
}

}  // namespace topoaware::mapper

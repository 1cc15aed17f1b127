// Reading scontrol's node records (slurm_nodes.h).
#include "topoaware/launch/slurm_nodes.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

using topology::Error;
using topology::ErrorCode;

// Flags that do not keep a new job off a node: a job finishing, backfill's plan for a pending
// job (a new one may still start before it), a cloud node that is up, a dynamic node, 22.05's
// network performance counters (PERFCTRS).
constexpr std::string_view kHarmlessFlags[] = {"COMPLETING", "PLANNED", "CLOUD", "DYNAMIC_NORM",
                                               "PERFCTRS"};
constexpr int kMaxGpusPerNode = 1 << 16;  // a bound on hostile counts, far above any machine

bool is_key(std::string_view word) {
  std::size_t eq = word.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  if (!std::isalpha(static_cast<unsigned char>(word[0]))) return false;
  return std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

// The free-text fields, printed after every field read here: reading stops at the first.
constexpr std::string_view kFreeText[] = {"Reason=", "Comment=", "Extra="};

// Key -> value of one record, up to its free text (see the header).
std::map<std::string, std::string, std::less<>> fields(std::string_view record) {
  std::map<std::string, std::string, std::less<>> out;
  std::string key, value;
  bool have = false;
  auto flush = [&] {
    if (have) out.emplace(key, value);
    have = false;
  };
  for (std::string_view w : words(record)) {
    if (is_key(w)) {
      flush();
      if (std::any_of(std::begin(kFreeText), std::end(kFreeText),
                      [&](std::string_view k) { return w.substr(0, k.size()) == k; })) {
        return out;
      }
      std::size_t eq = w.find('=');
      key.assign(w.substr(0, eq));
      value.assign(w.substr(eq + 1));
      have = true;
    } else if (have) {
      value += ' ';
      value.append(w);
    }
  }
  flush();
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Entries of a Gres list, split at commas outside parentheses ("gpu:h100:4(S:0,2),nic:2").
std::vector<std::string_view> gres_entries(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] == '(') ++depth;
    if (i < s.size() && s[i] == ')' && depth > 0) --depth;
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      if (i > start) out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

int count_of(std::string_view digits, const std::string& where, const std::string& what) {
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    throw Error(ErrorCode::kBadInput, where,
                what + ": '" + std::string(digits) + "' is not a GPU count");
  }
  long long n = 0;
  for (char c : digits) {
    n = n * 10 + (c - '0');
    if (n > kMaxGpusPerNode) {
      throw Error(ErrorCode::kLimit, where,
                  what + ": more than " + std::to_string(kMaxGpusPerNode) + " GPUs");
    }
  }
  return static_cast<int>(n);
}

// GPUs in a Gres or GresUsed value: entries "gpu:N" or "gpu:TYPE:N", "(...)" after the count.
int gres_gpus(std::string_view value, const std::string& where, const std::string& key) {
  if (value == "(null)" || value == "N/A") return 0;
  int total = 0;
  for (std::string_view entry : gres_entries(value)) {
    // The count ends where a trailing "(S:...)" or "(IDX:...)" begins; a type may be "(null)".
    while (!entry.empty() && entry.back() == ')') {
      int depth = 0;
      std::size_t i = entry.size();
      while (i-- > 0) {
        if (entry[i] == ')') ++depth;
        if (entry[i] == '(' && --depth == 0) break;
      }
      if (i == std::string_view::npos || depth != 0) break;
      entry = entry.substr(0, i);
    }
    std::size_t colon = entry.find(':');
    if (entry.substr(0, colon) != "gpu") continue;
    if (colon == std::string_view::npos) {  // "gpu" alone: one
      total += 1;
      continue;
    }
    total += count_of(entry.substr(entry.rfind(':') + 1), where, key + "=" + std::string(value));
    if (total > kMaxGpusPerNode) {
      throw Error(ErrorCode::kLimit, where,
                  key + ": more than " + std::to_string(kMaxGpusPerNode) + " GPUs");
    }
  }
  return total;
}

// gres/gpu's count in a TRES list ("cpu=8,mem=2000M,gres/gpu=4,gres/gpu:h100=4"); none when the
// list does not account GPUs.
std::optional<int> tres_gpus(std::string_view value, const std::string& where,
                             const std::string& key) {
  for (const std::string& item : split(value, ',')) {
    if (item.rfind("gres/gpu=", 0) == 0) {
      return count_of(std::string_view(item).substr(9), where, key + "=" + std::string(value));
    }
  }
  return std::nullopt;
}

SlurmNode node_of(std::string_view record, const std::string& where) {
  auto f = fields(record);
  auto get = [&](std::string_view key) -> const std::string* {
    auto it = f.find(key);
    return it == f.end() ? nullptr : &it->second;
  };
  SlurmNode n;
  const std::string* name = get("NodeName");
  if (name == nullptr || name->empty()) {
    throw Error(ErrorCode::kBadInput, where, "a node record without NodeName");
  }
  n.name = *name;
  const std::string* state = get("State");
  if (state == nullptr || state->empty()) {
    throw Error(ErrorCode::kBadInput, where, "node " + n.name + " has no State");
  }
  std::vector<std::string> parts = split(*state, '+');
  n.state = parts.empty() ? std::string() : parts.front();
  // sinfo's and older releases' short form marks a node not responding with a trailing '*'.
  if (!n.state.empty() && n.state.back() == '*') {
    n.state.pop_back();
    n.flags.emplace_back("NOT_RESPONDING");
  }
  for (std::size_t i = 1; i < parts.size(); ++i) n.flags.push_back(parts[i]);
  if (const std::string* p = get("Partitions")) n.partitions = split(*p, ',');
  if (const std::string* g = get("Gres")) n.gpus = gres_gpus(*g, where, "Gres");
  if (n.gpus == 0) {
    if (const std::string* cfg = get("CfgTRES"))
      n.gpus = tres_gpus(*cfg, where, "CfgTRES").value_or(0);
  }
  if (const std::string* used = get("GresUsed")) {
    n.gpus_used = gres_gpus(*used, where, "GresUsed");
    n.gpus_used_known = true;
  } else if (const std::string* alloc = get("AllocTRES")) {
    if (std::optional<int> g = tres_gpus(*alloc, where, "AllocTRES")) {
      n.gpus_used = *g;
      n.gpus_used_known = true;
    } else if (const std::string* cfg = get("CfgTRES");
               cfg != nullptr && tres_gpus(*cfg, where, "CfgTRES").has_value()) {
      n.gpus_used_known = true;  // GPUs accounted, none allocated: AllocTRES leaves it out
    }
  }
  return n;
}

// Calls `line` with each line of `text` (without its '\n') until it returns false.
template <typename F>
void for_each_line(std::string_view text, F&& line) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (!line(text.substr(start, end - start))) return;
    start = end + 1;
  }
}

}  // namespace

int SlurmNode::free_gpus() const {
  if (!gpus_used_known) return state == "IDLE" ? gpus : 0;
  return std::max(0, gpus - gpus_used);
}

std::string SlurmNode::unusable() const {
  if (state != "IDLE" && state != "MIXED") return "state " + state;
  for (const std::string& flag : flags) {
    if (std::find(std::begin(kHarmlessFlags), std::end(kHarmlessFlags), flag) ==
        std::end(kHarmlessFlags)) {
      return "flag " + flag;
    }
  }
  if (gpus == 0) return "no GPU configured";
  if (free_gpus() == 0) return "no free GPU";
  return {};
}

bool SlurmNode::in_partition(const std::string& partition) const {
  return std::find(partitions.begin(), partitions.end(), partition) != partitions.end();
}

std::vector<SlurmNode> parse_scontrol_nodes(std::string_view text, const std::string& source) {
  std::vector<SlurmNode> nodes;
  std::string record;
  long record_line = 0, line_no = 0;
  auto finish = [&] {
    if (!record.empty()) nodes.push_back(node_of(record, topology::where(source, record_line)));
    record.clear();
  };
  for_each_line(text, [&](std::string_view line) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) return true;
    if (line.rfind("NodeName=", 0) == 0) {
      finish();
      record_line = line_no;
      record.assign(line);
    } else if ((line.front() == ' ' || line.front() == '\t') && !record.empty()) {
      record += ' ';
      record.append(line);
    } else {
      std::string shown(line.substr(0, 80));
      throw Error(ErrorCode::kBadInput, topology::where(source, line_no),
                  "not a node record of scontrol show nodes: '" + shown + "'");
    }
    return true;
  });
  finish();
  return nodes;
}

std::string default_partition(std::string_view text) {
  std::string name, found;
  for_each_line(text, [&](std::string_view line) {
    // Records may span lines (without --oneliner): PartitionName= opens one.
    for (std::string_view w : words(line)) {
      if (w.rfind("PartitionName=", 0) == 0) name.assign(w.substr(14));
      if (w == "Default=YES" && !name.empty()) {
        found = name;
        return false;
      }
    }
    return true;
  });
  return found;
}

}  // namespace topoaware::launch

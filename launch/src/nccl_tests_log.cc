#include "topoaware/launch/nccl_tests_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch::nccltests {
namespace {

using topology::Error;
using topology::ErrorCode;

// ---- text helpers -----------------------------------------------------------------------------

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// A whole token as an integer ("-1" included); nothing else accepted.
std::optional<long long> to_int(std::string_view s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A whole token as a finite number: what nccl-tests prints (%.2f, %.1f, %.0f, %e, %g).
std::optional<double> to_number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// What job launchers put in front of a program's lines: OpenMPI's --tag-output "[1,0]<stdout>:",
// Intel MPI's and mpirun -prepend-rank "[0] ", srun -l's "0: ". NCCL's own "host:pid:tid [dev]"
// is not removed here: NCCL INFO lines are found by their "NCCL INFO " wherever it is.
std::string_view strip_launcher_prefix(std::string_view s) {
  for (;;) {
    s = trim(s);
    if (!s.empty() && s.front() == '[') {
      const std::size_t close = s.find(']');
      if (close == std::string_view::npos) return s;
      const std::string_view inside = s.substr(1, close - 1);
      if (inside.empty() || !std::all_of(inside.begin(), inside.end(),
                                         [](char c) { return is_digit(c) || c == ','; })) {
        return s;
      }
      s.remove_prefix(close + 1);
      if (starts_with(s, "<stdout>:")) s.remove_prefix(9);
      if (starts_with(s, "<stderr>:")) s.remove_prefix(9);
      continue;
    }
    std::size_t i = 0;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i > 0 && i < s.size() && s[i] == ':' && (i + 1 == s.size() || is_space(s[i + 1]))) {
      s.remove_prefix(i + 1);
      continue;
    }
    return s;
  }
}

// "2.18.3" from the first "X.Y.Z" at the start of `s`, empty if there is none.
std::string version_at(std::string_view s) {
  std::size_t i = 0, dots = 0;
  while (i < s.size() && (is_digit(s[i]) || (s[i] == '.' && i > 0 && is_digit(s[i - 1])))) {
    if (s[i] == '.') ++dots;
    ++i;
  }
  std::string_view v = s.substr(0, i);
  if (!v.empty() && v.back() == '.') {
    v.remove_suffix(1);
    --dots;
  }
  return dots == 2 ? std::string(v) : std::string();
}

// NCCL_VERSION_CODE as nccl-tests prints it (nccl-library=21803): X*10000 + Y*100 + Z since 2.9.
std::string version_of_code(long long code) {
  if (code < 20900) return {};
  return std::to_string(code / 10000) + "." + std::to_string((code % 10000) / 100) + "." +
         std::to_string(code % 100);
}

// "all_reduce_perf" from "/opt/nccl-tests/build/all_reduce_perf" or "./build/all_reduce_perf_mpi".
std::string perf_binary_in(std::string_view line) {
  for (std::string_view token : split(line)) {
    const std::size_t slash = token.rfind('/');
    if (slash != std::string_view::npos) token.remove_prefix(slash + 1);
    while (!token.empty() && (token.front() == '`' || token.front() == '"' ||
                              token.front() == '\'' || token.front() == '(')) {
      token.remove_prefix(1);
    }
    while (!token.empty() && (token.back() == ',' || token.back() == ';' || token.back() == '`' ||
                              token.back() == '"' || token.back() == '\'')) {
      token.remove_suffix(1);
    }
    const std::size_t perf = token.find("_perf");
    if (perf == std::string_view::npos || perf == 0) continue;
    const std::string_view tail = token.substr(perf);
    if (tail != "_perf" && tail != "_perf_mpi") continue;
    if (!std::all_of(token.begin(), token.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
      continue;
    }
    return std::string(token);
  }
  return {};
}

// ---- NCCL INFO lines --------------------------------------------------------------------------

// NCCL's enum order (src/include/nccl_common.h, src/init.cc ncclAlgoStr/ncclProtoStr, 2.18-2.29).
constexpr const char* kAlgoNames[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                      "NVLSTree", "PAT"};
constexpr const char* kProtoNames[] = {"LL", "LL128", "Simple"};

// NCCL's name for an algorithm or protocol, one spelling whatever the line used: the numeric ids
// of 2.20-2.23 by enum order, and the upper-case names of ncclAlgoToString/ncclProtoToString
// (2.24+: "RING", "NVLS_TREE", "SIMPLE") matched to ncclAlgoStr/ncclProtoStr ("Ring", "NVLSTree").
template <std::size_t N>
std::string name_of(std::string_view token, const char* const (&names)[N]) {
  if (const auto id = to_int(token); id && *id >= 0 && *id < static_cast<long long>(N)) {
    return names[*id];
  }
  const auto folded = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '_') continue;
      out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
    }
    return out;
  };
  for (const char* name : names) {
    if (folded(name) == folded(token)) return name;
  }
  return std::string(token);
}

// One TUNING line (the forms are in the header); nullopt when `msg` is not one.
std::optional<TunedCall> tuned_call(std::string_view msg, int line) {
  const std::size_t arrow = msg.find(" Bytes -> ");
  if (arrow == std::string_view::npos) return std::nullopt;
  TunedCall call;
  call.line = line;
  std::string_view left = msg.substr(0, arrow);
  bool symmetric = false;
  if (const std::size_t colon = left.rfind(':'); colon != std::string_view::npos) {
    std::string_view func = trim(left.substr(0, colon));
    if (const std::size_t sym = func.find(" [Symmetric]"); sym != std::string_view::npos) {
      symmetric = true;
      func = func.substr(0, sym);
    }
    call.func = std::string(func);
    left = left.substr(colon + 1);
  }
  const auto bytes = to_int(trim(left));
  if (!bytes || *bytes < 0) return std::nullopt;
  call.bytes = static_cast<double>(*bytes);
  const std::vector<std::string_view> right = split(msg.substr(arrow + 10));
  if (right.size() >= 2 && right[0] == "Kernel") {
    call.algo = symmetric ? "Symmetric" : "";
    call.kernel = std::string(right[1]);
    for (std::size_t i = 2; i + 1 < right.size(); ++i) {
      if (right[i] == "nchannels") {
        if (const auto n = to_int(right[i + 1])) call.channels = static_cast<int>(*n);
      }
    }
    return call;
  }
  if (right.size() < 4 || right[0] != "Algo" || right[2] != "proto") return std::nullopt;
  call.algo = name_of(right[1], kAlgoNames);
  call.proto = name_of(right[3], kProtoNames);
  for (std::size_t i = 4; i < right.size(); ++i) {
    if (right[i] == "time" && i + 1 < right.size()) {
      if (const auto t = to_number(right[i + 1])) call.time_us = *t;
    }
    // channel{Lo..Hi}={0..31}
    if (starts_with(right[i], "channel{Lo..Hi}={")) {
      std::string_view range = right[i].substr(17);
      const std::size_t dots = range.find("..");
      if (dots != std::string_view::npos && !range.empty() && range.back() == '}') {
        const auto lo = to_int(range.substr(0, dots));
        const auto hi = to_int(range.substr(dots + 2, range.size() - dots - 3));
        if (lo && hi && *hi >= *lo) call.channels = static_cast<int>(*hi - *lo + 1);
      }
    }
  }
  return call;
}

// What NCCL INFO lines tell about a run, kept until the run they belong to is known.
struct NcclInfo {
  std::string version;
  std::map<std::string, std::string> env;
  int coll_channels = -1;
  int ring_channels = -1;
  int nranks = 0;
  std::vector<TunedCall> calls;

  void merge_into(Run& run) const {
    if (run.nccl_version.empty()) run.nccl_version = version;
    for (const auto& [key, value] : env) run.nccl_env.emplace(key, value);
    run.calls.insert(run.calls.end(), calls.begin(), calls.end());
  }
};

void read_info(std::string_view msg, int line, NcclInfo& info) {
  msg = trim(msg);
  if (starts_with(msg, "NCCL version ")) {
    if (info.version.empty()) info.version = version_at(msg.substr(13));
    return;
  }
  // "NCCL_ALGO set by environment to Ring" (src/misc/param.cc prints integers as "%lld.").
  if (const std::size_t set = msg.find(" set by environment to "); set != std::string_view::npos) {
    const std::string_view name = trim(msg.substr(0, set));
    std::string_view value = trim(msg.substr(set + 23));
    if (starts_with(name, "NCCL_") && name.find(' ') == std::string_view::npos) {
      if (!value.empty() && value.back() == '.') value.remove_suffix(1);
      info.env[std::string(name)] = std::string(value);
    }
    return;
  }
  const std::vector<std::string_view> tokens = split(msg);
  // "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, ..."
  if (tokens.size() >= 3 && tokens[1] == "coll" && starts_with(tokens[2], "channels")) {
    if (const auto n = to_int(tokens[0]); n && info.coll_channels < 0) {
      info.coll_channels = static_cast<int>(*n);
    }
    return;
  }
  // graph/rings.cc "Channel 00/24 :    0   1   2 ..." (a ring); transport lines such as
  // "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" are connections, not the channel count.
  if (tokens.size() >= 3 && tokens[0] == "Channel" && tokens[2] == ":") {
    const std::size_t slash = tokens[1].find('/');
    if (slash != std::string_view::npos &&
        std::all_of(tokens.begin() + 3, tokens.end(),
                    [](std::string_view t) { return all_digits(t); })) {
      if (const auto n = to_int(tokens[1].substr(slash + 1)); n && *n > info.ring_channels) {
        info.ring_channels = static_cast<int>(*n);
      }
    }
    return;
  }
  // "comm 0x... rank 0 nranks 16 cudaDev 0 ..." / "rank 0 nRanks 24 nNodes 3 ..."
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i] == "nranks" || tokens[i] == "nRanks") {
      if (const auto n = to_int(tokens[i + 1]); n && *n > info.nranks)
        info.nranks = static_cast<int>(*n);
    }
  }
  if (auto call = tuned_call(msg, line)) info.calls.push_back(std::move(*call));
}

// ---- the results table ------------------------------------------------------------------------

// Where the columns of a results table are, from its header line ("size count type redop root
// time algbw busbw #wrong time ..."): tests and releases differ in the preamble (no redop for
// all_gather before 2.13, no root before 2.13), in per-iteration columns and a timestamp.
struct Layout {
  bool root = false;    // the header has a root column
  int groups = 0;       // out of place, in place
  int group_width = 0;  // time algbw busbw #wrong [i_min i_max i_p99 i_cv%]
  int timestamp = 0;    // tokens of a trailing timestamp ("%Y-%m-%d %H:%M:%S": 2)
};

std::optional<Layout> layout_of(const std::vector<std::string_view>& tokens) {
  if (tokens.size() < 6 || tokens[0] != "size" || tokens[1] != "count") return std::nullopt;
  Layout layout;
  std::vector<std::size_t> starts;
  for (std::size_t i = 2; i < tokens.size(); ++i) {
    if (tokens[i] == "root") layout.root = true;
    if (tokens[i] == "time" || tokens[i] == "cputime") starts.push_back(i);
    if (tokens[i] == "timestamp") layout.timestamp = 2;
  }
  if (starts.empty() || starts.size() > 2) return std::nullopt;
  const std::size_t end = tokens.size() - (layout.timestamp ? 1 : 0);
  layout.groups = static_cast<int>(starts.size());
  layout.group_width = static_cast<int>((starts.size() == 2 ? starts[1] : end) - starts[0]);
  if (starts.size() == 2 && end - starts[1] != starts[1] - starts[0]) return std::nullopt;
  if (layout.group_width < 3 || tokens[starts[0] + 1] != "algbw" ||
      tokens[starts[0] + 2] != "busbw") {
    return std::nullopt;
  }
  return layout;
}

Row read_row(const std::vector<std::string_view>& tokens, const Layout& layout,
             const std::string& where) {
  const auto bad = [&](const std::string& what) { throw Error(ErrorCode::kBadInput, where, what); };
  const int max_preamble = 4 + (layout.root ? 1 : 0);  // size count type [redop] [root]
  const int n = static_cast<int>(tokens.size());
  // Both groups; else out of place only, as printed where the in-place run is absent.
  int groups = layout.groups;
  int preamble = n - groups * layout.group_width - layout.timestamp;
  if (preamble < 3 && groups == 2) {
    groups = 1;
    preamble = n - layout.group_width - layout.timestamp;
  }
  if (preamble < 3) {
    bad("results row has " + std::to_string(n) + " columns, the table has " +
        std::to_string(3 + layout.groups * layout.group_width + layout.timestamp) +
        " or more (truncated?)");
  }
  if (preamble > max_preamble) {
    bad("results row has " + std::to_string(n) + " columns, more than the table's header names");
  }
  Row row;
  const auto bytes = to_int(tokens[0]);
  const auto count = to_int(tokens[1]);
  if (!bytes || *bytes < 0)
    bad("results row: size '" + std::string(tokens[0]) + "' is not a byte count");
  if (!count || *count < 0)
    bad("results row: count '" + std::string(tokens[1]) + "' is not an element count");
  row.bytes = static_cast<double>(*bytes);
  row.count = *count;
  if (to_number(tokens[2])) bad("results row: type '" + std::string(tokens[2]) + "' is a number");
  row.type = std::string(tokens[2]);
  if (preamble >= 4) {
    const std::string_view last = tokens[static_cast<std::size_t>(preamble - 1)];
    const bool last_is_root = layout.root && to_int(last).has_value();
    if (last_is_root) row.root = static_cast<int>(*to_int(last));
    const int redops = preamble - 3 - (last_is_root ? 1 : 0);
    if (redops > 1) bad("results row has more columns before the times than the header names");
    if (redops == 1) {
      if (to_number(tokens[3]))
        bad("results row: redop '" + std::string(tokens[3]) + "' is a number");
      row.redop = std::string(tokens[3]);
    }
  }
  int next = preamble;
  const char* const names[] = {"time", "algbw", "busbw"};
  for (int g = 0; g < groups; ++g) {
    double values[3] = {0, 0, 0};
    for (int k = 0; k < layout.group_width; ++k) {
      const std::string_view token = tokens[static_cast<std::size_t>(next + k)];
      const auto value = to_number(token);
      // "#wrong" and the per-iteration columns may say N/A; time, algbw, busbw of the in-place
      // half may too (0 then); the out-of-place figures are what a fit rests on.
      if (!value && !(token == "N/A" && (k >= 3 || g == 1))) {
        const std::string column =
            k < 3 ? std::string(names[k])
                  : (k == 3 ? std::string("#wrong") : "column " + std::to_string(k + 1));
        bad("results row: " + std::string(g == 0 ? "out-of-place " : "in-place ") + column + " '" +
            std::string(token) + "' is not a number");
      }
      if (k < 3 && value) values[k] = *value;
    }
    (g == 0 ? row.oop_time_us : row.ip_time_us) = values[0];
    (g == 0 ? row.oop_algbw : row.ip_algbw) = values[1];
    (g == 0 ? row.oop_busbw : row.ip_busbw) = values[2];
    next += layout.group_width;
  }
  return row;
}

// "Rank  3 Group  0 Pid 12345 on host-a device  3 [0000:5d:00] NVIDIA H100 80GB HBM3" (v2.13+),
// "Rank  3 Pid 12345 on host-a device  3 [0x5d] A100-SXM4-40GB" (before), '#' already removed.
std::optional<RankLine> rank_line(std::string_view body, int line) {
  const std::vector<std::string_view> t = split(body);
  if (t.size() < 8 || t[0] != "Rank") return std::nullopt;
  std::size_t i = 2;
  if (t[i] == "Group") i += 2;
  if (i + 5 >= t.size() || t[i] != "Pid" || t[i + 2] != "on" || t[i + 4] != "device")
    return std::nullopt;
  const auto rank = to_int(t[1]);
  const auto device = to_int(t[i + 5]);
  if (!rank || !device) return std::nullopt;
  RankLine r;
  r.rank = static_cast<int>(*rank);
  r.host = std::string(t[i + 3]);
  r.device = static_cast<int>(*device);
  r.line = line;
  // The rest: "[bus] name", the name keeping its spaces.
  const std::size_t open = body.find('[', static_cast<std::size_t>(t[i + 5].data() - body.data()));
  const std::size_t close = open == std::string_view::npos ? open : body.find(']', open);
  if (close != std::string_view::npos) {
    r.bus_id = std::string(body.substr(open + 1, close - open - 1));
    r.gpu = std::string(trim(body.substr(close + 1)));
  }
  return r;
}

// The stages of an nccl-tests header, in the order it prints them: a marker of an earlier stage
// than the last one seen, or any marker after the table has rows, starts the next run.
enum class Stage { kVersion, kStarting, kParams, kDevices, kRank, kTable };

struct RunReader {
  std::string source;
  std::vector<Run> runs;
  Run* run = nullptr;  // the run lines attach to; null before the first and after one ends
  Stage stage = Stage::kVersion;
  std::optional<Layout> layout;
  NcclInfo info;             // of the current run
  NcclInfo pending;          // seen outside a run: belongs to the next one
  std::string pending_test;  // a *_perf binary named before its run started
  long long nthread_gpus = 0;

  void finish() {
    if (run == nullptr) return;
    info.merge_into(*run);
    if (!run->ranks.empty()) {
      int highest = -1;
      for (const RankLine& r : run->ranks) highest = std::max(highest, r.rank);
      run->nranks = highest + 1;
    } else if (info.nranks > 0) {
      run->nranks = info.nranks;
    } else if (nthread_gpus > 1) {
      run->nranks = static_cast<int>(nthread_gpus);
    }
    run->channels = info.coll_channels >= 0 ? info.coll_channels : info.ring_channels;
    if (!run->test_name.empty()) {
      run->test = test_from_name(run->test_name);
    } else {
      run->test = test_from_table(*run);
    }
    run = nullptr;
    layout.reset();
    info = NcclInfo{};
    nthread_gpus = 0;
  }

  // A log without the test's name (nccl-tests before 2.17 does not print it, a pasted table
  // lacks the command): the table still tells a reduction whose busbw is algbw x 2(n-1)/n, an
  // all-reduce, from one whose busbw is algbw x (n-1)/n, a reduce-scatter. Other tests print no
  // redop (all_gather, alltoall) or share the factor 1 (reduce, broadcast, sendrecv): kOther.
  static Test test_from_table(const Run& run) {
    if (run.nranks <= 2 || run.rows.empty()) return Test::kOther;
    const Row* largest = nullptr;
    for (const Row& row : run.rows) {
      if (row.oop_algbw > 0 && (largest == nullptr || row.bytes > largest->bytes)) largest = &row;
    }
    if (largest == nullptr || largest->redop.empty() || largest->redop == "none")
      return Test::kOther;
    const double ratio = largest->oop_busbw / largest->oop_algbw;
    const double n = run.nranks;
    if (std::abs(ratio / (2 * (n - 1) / n) - 1) < 0.01) return Test::kAllReduce;
    if (std::abs(ratio / ((n - 1) / n) - 1) < 0.01) return Test::kReduceScatter;
    return Test::kOther;
  }

  Run& open(Stage marker, int line) {
    if (run == nullptr || !run->rows.empty() || marker < stage) {
      finish();
      runs.emplace_back();
      run = &runs.back();
      run->source = source;
      run->first_line = line;
      run->test_name = std::move(pending_test);
      pending_test.clear();
      info = std::move(pending);
      pending = NcclInfo{};
    }
    stage = marker;
    return *run;
  }

  NcclInfo& info_sink() { return run != nullptr ? info : pending; }
};

}  // namespace

const char* to_string(Test t) {
  switch (t) {
    case Test::kAllReduce:
      return "all_reduce";
    case Test::kReduceScatter:
      return "reduce_scatter";
    case Test::kAllGather:
      return "all_gather";
    case Test::kAllToAll:
      return "alltoall";
    case Test::kSendRecv:
      return "sendrecv";
    case Test::kOther:
      break;
  }
  return "other";
}

Test test_from_name(std::string_view name) {
  const std::size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (const std::size_t perf = name.find("_perf"); perf != std::string_view::npos) {
    name = name.substr(0, perf);
  }
  if (name == "all_reduce") return Test::kAllReduce;
  if (name == "reduce_scatter") return Test::kReduceScatter;
  if (name == "all_gather") return Test::kAllGather;
  if (name == "alltoall") return Test::kAllToAll;
  if (name == "sendrecv") return Test::kSendRecv;
  return Test::kOther;
}

std::vector<Run> parse(std::string_view text, const std::string& source) {
  RunReader reader;
  reader.source = source;
  int line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string where = topology::where(source, line_no);

    if (const std::size_t info = raw.find("NCCL INFO "); info != std::string_view::npos) {
      read_info(raw.substr(info + 10), line_no, reader.info_sink());
      continue;
    }
    // NCCL before 2.? printed its version with printf, without "NCCL INFO".
    if (const std::size_t v = raw.find("NCCL version "); v != std::string_view::npos) {
      read_info(raw.substr(v), line_no, reader.info_sink());
      continue;
    }

    std::string_view body = strip_launcher_prefix(raw);
    // A pasted log may have lost its '#' (a markdown heading); the headers read the same without.
    while (!body.empty() && body.front() == '#') body.remove_prefix(1);
    body = trim(body);
    if (body.empty()) continue;

    if (starts_with(body, "nccl-tests version")) {
      Run& run = reader.open(Stage::kVersion, line_no);
      const std::size_t lib = body.find("nccl-library=");
      if (lib != std::string_view::npos) {
        const std::vector<std::string_view> t = split(body.substr(lib + 13));
        if (!t.empty()) {
          if (const auto code = to_int(t[0])) run.nccl_version = version_of_code(*code);
        }
      }
      continue;
    }
    if (starts_with(body, "Collective test starting:")) {
      Run& run = reader.open(Stage::kStarting, line_no);
      run.test_name = std::string(trim(body.substr(25)));
      continue;
    }
    if (starts_with(body, "nThread ")) {
      const std::vector<std::string_view> t = split(body);
      if (t.size() >= 4 && t[2] == "nGpus") {
        reader.open(Stage::kParams, line_no);
        const auto threads = to_int(t[1]);
        const auto gpus = to_int(t[3]);
        if (threads && gpus) reader.nthread_gpus = *threads * *gpus;
        continue;
      }
    }
    if (body == "Using devices") {
      reader.open(Stage::kDevices, line_no);
      continue;
    }
    if (starts_with(body, "Rank ")) {
      if (auto rank = rank_line(body, line_no)) {
        reader.open(Stage::kRank, line_no).ranks.push_back(std::move(*rank));
        continue;
      }
    }
    const std::vector<std::string_view> tokens = split(body);
    if (!tokens.empty() && tokens[0] == "size") {
      if (auto layout = layout_of(tokens)) {
        reader.open(Stage::kTable, line_no);
        reader.layout = layout;
        continue;
      }
    }
    // The footer's other lines; "concluded: all_reduce_perf" must not name the next run.
    if (starts_with(body, "Out of bounds values") ||
        starts_with(body, "Collective test concluded")) {
      continue;
    }
    if (starts_with(body, "Avg bus bandwidth")) {
      if (reader.run != nullptr) {
        const std::size_t colon = body.find(':');
        const std::vector<std::string_view> t =
            split(colon == std::string_view::npos ? std::string_view() : body.substr(colon + 1));
        if (!t.empty()) {
          if (const auto bw = to_number(t[0])) reader.run->avg_busbw = *bw;
        }
        reader.finish();
      }
      continue;
    }
    if (reader.run != nullptr && reader.layout && all_digits(tokens.front())) {
      reader.run->rows.push_back(read_row(tokens, *reader.layout, where));
      reader.run->rows.back().line = line_no;
      continue;
    }
    // A command line naming the test (mpirun ... all_reduce_perf -b 8 ...).
    if (std::string binary = perf_binary_in(body); !binary.empty()) {
      if (reader.run != nullptr && reader.run->rows.empty() && reader.run->test_name.empty()) {
        reader.run->test_name = std::move(binary);
      } else if (reader.run == nullptr || !reader.run->rows.empty()) {
        reader.pending_test = std::move(binary);
      }
    }
  }
  reader.finish();
  if (reader.runs.empty()) {
    throw Error(ErrorCode::kBadInput, source,
                "no nccl-tests run in it (no results table, rank lines or nccl-tests header)");
  }
  return std::move(reader.runs);
}

std::vector<Run> read(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound, path, "nccl-tests log not found");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw Error(ErrorCode::kSystem, path, "cannot read the nccl-tests log");
  return parse(text.str(), path);
}

double busbw_factor(Test t, int nranks) {
  if (nranks < 1) return 0;
  return mapper::busbw::busbw_factor(model_collective(t), nranks);
}

mapper::busbw::Collective model_collective(Test t) {
  using C = mapper::busbw::Collective;
  switch (t) {
    case Test::kAllReduce:
      return C::kAllReduce;
    case Test::kReduceScatter:
    case Test::kAllGather:
      return C::kAllGather;
    case Test::kAllToAll:
      return C::kAllToAll;
    case Test::kSendRecv:
    case Test::kOther:
      break;
  }
  return C::kSendRecv;
}

// Weighted least squares of time_us = a + b * bytes over the out-of-place rows, weight 1/time.
//
// Why 1/time: one latency and one bandwidth do not describe NCCL over the whole range of sizes
// (it changes protocol, LL -> LL128 -> Simple, and pipelines a message in chunks, so mid sizes
// take longer than latency + size/peak), so the weighting decides which sizes the compromise
// serves. On the 2 x 8 H100 log of tests/fixtures/nccl-tests (31 sizes, 8 B - 8 GiB, published
// 338.8 GB/s busbw at 8 GiB):
//   - relative error (weight 1/time^2) gives every size one vote; the twenty sizes under 1 MiB,
//     flat at ~125 us, and the mid sizes pull the slope: busbw 273.5 GB/s, 19% under the plateau;
//   - absolute error (weight 1) lets the two largest sizes decide: busbw 338.9, but a latency of
//     360 us, three times what the small sizes measure;
//   - 1/time, the weighting of counts whose variance grows with their mean, keeps both ends:
//     latency 172 us and busbw 327.6 GB/s (3% under the published figure).
// The plateau is reported beside the fit for what the fit cannot be: the bandwidth the largest
// messages reach.
Fit fit(const Run& run) {
  std::vector<const Row*> points;
  for (const Row& row : run.rows) {
    if (row.bytes > 0 && row.oop_time_us > 0) points.push_back(&row);
  }
  if (points.size() < 2) {
    throw Error(
        ErrorCode::kBadInput, topology::where(run.source, run.first_line),
        "nccl-tests run has " + std::to_string(points.size()) +
            " size(s) of more than 0 bytes with an out-of-place time; a fit needs 2 or more");
  }
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const Row* row : points) {
    const double w = 1 / row->oop_time_us;
    const double x = row->bytes;
    const double t = row->oop_time_us;
    sw += w;
    sx += w * x;
    sxx += w * x * x;
    st += w * t;
    sxt += w * x * t;
  }
  const double det = sw * sxx - sx * sx;
  double slope = det > 0 ? (sw * sxt - sx * st) / det : 0;
  double latency = det > 0 ? (st - slope * sx) / sw : st / sw;
  if (latency < 0) {  // a negative latency means nothing: through the origin instead
    latency = 0;
    slope = sxt / sxx;
  }
  Fit out;
  out.points = static_cast<int>(points.size());
  out.latency_us = latency;
  out.algbw_GBps = slope > 0 ? 1 / (slope * 1e3) : 0;

  // nccl-tests' own factor where the test and the ranks are known; else the ratio it printed for
  // the largest size (it knew both).
  double factor = 0;
  if (run.test != Test::kOther && run.nranks > 0) {
    factor = busbw_factor(run.test, run.nranks);
  } else {
    const Row* largest = nullptr;
    for (const Row* row : points) {
      if (row->oop_algbw > 0 && (largest == nullptr || row->bytes > largest->bytes)) largest = row;
    }
    if (largest != nullptr) factor = largest->oop_busbw / largest->oop_algbw;
  }
  out.busbw_GBps = out.algbw_GBps * factor;

  double largest_bytes = 0;
  for (const Row* row : points) largest_bytes = std::max(largest_bytes, row->bytes);
  std::vector<double> plateau;
  for (const Row* row : points) {
    if (row->bytes * 4 >= largest_bytes) plateau.push_back(row->oop_busbw);
  }
  std::sort(plateau.begin(), plateau.end());
  const std::size_t m = plateau.size();
  out.plateau_busbw_GBps = m % 2 ? plateau[m / 2] : (plateau[m / 2 - 1] + plateau[m / 2]) / 2;
  return out;
}

}  // namespace topoaware::launch::nccltests

// The shadow line, written and read (shadow.h).
#include "topoaware/launch/shadow.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <map>
#include <system_error>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

using topology::Error;
using topology::ErrorCode;

constexpr std::size_t kMaxLayout = 256;
constexpr std::size_t kMaxReason = 512;

std::string cut(std::string text, std::size_t max) {
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

// A value as written: bare when it is one printable word, else in double quotes with `"` and `\`
// escaped; control characters (a newline in an error message) become spaces either way.
std::string value_text(const std::string& value, bool quote) {
  std::string clean;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    clean += u < 0x20 || u == 0x7f ? ' ' : c;
  }
  if (!quote) quote = clean.empty() || clean.find_first_of(" \"\\") != std::string::npos;
  if (!quote) return clean;
  std::string out = "\"";
  for (char c : clean) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ms_text(const std::optional<double>& ms) {
  if (!ms) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", *ms);
  return buf;
}

// 2026-12-07T08:00:00Z
bool is_utc_time(std::string_view t) {
  static constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:ddZ";
  if (t.size() != kShape.size()) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (kShape[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != kShape[i]) return false;
  }
  return true;
}

std::uint32_t number(const std::string& text, const std::string& key, const std::string& where) {
  std::uint32_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw Error(ErrorCode::kBadInput, where, key + "=" + text + ": expected a whole number");
  }
  return n;
}

std::optional<double> decimal(std::string text, const std::string& key, const std::string& where,
                              bool percent) {
  if (text == "-") return std::nullopt;
  if (percent) {
    if (text.empty() || text.back() != '%') {
      throw Error(ErrorCode::kBadInput, where, key + "=" + text + ": expected a percentage");
    }
    text.pop_back();
  }
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    throw Error(ErrorCode::kBadInput, where, key + "=" + text + ": expected a number or -");
  }
  return v;
}

}  // namespace

const char* to_string(ShadowVerdict verdict) {
  switch (verdict) {
    case ShadowVerdict::kWouldApply:
      return "would-apply";
    case ShadowVerdict::kWouldRefuse:
      return "would-refuse";
    case ShadowVerdict::kError:
      return "error";
  }
  return "error";
}

double saving_percent(double plan_seconds, double block_seconds) {
  return block_seconds > 0 ? (block_seconds - plan_seconds) / block_seconds * 100 : 0;
}

std::string format_spread(const std::vector<SpreadLevel>& spread) {
  std::string out;
  for (const auto& l : spread) {
    out += (out.empty() ? "" : ",") + l.level + ":" + std::to_string(l.used) + "/" +
           std::to_string(l.fewest);
  }
  return out.empty() ? "-" : out;
}

std::vector<SpreadLevel> parse_spread(std::string_view text) {
  std::vector<SpreadLevel> out;
  auto number = [](std::string_view t, std::size_t& v) {
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && ptr == t.data() + t.size() && !t.empty();
  };
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t colon = item.find(':'), slash = item.find('/');
    if (colon == std::string_view::npos || slash == std::string_view::npos || slash < colon) {
      continue;
    }
    SpreadLevel l;
    l.level = std::string(item.substr(0, colon));
    if (number(item.substr(colon + 1, slash - colon - 1), l.used) &&
        number(item.substr(slash + 1), l.fewest)) {
      out.push_back(std::move(l));
    }
  }
  return out;
}

std::string format_shadow_line(const ShadowRecord& r) {
  char saving[64] = "-";
  if (r.saving_pct) std::snprintf(saving, sizeof saving, "%.1f%%", *r.saving_pct);
  std::string line =
      r.time + " topo-aware shadow job=" + std::to_string(r.job) +
      " step=" + std::to_string(r.step) + " user=" + value_text(r.user, false) +
      " hosts=" + std::to_string(r.hosts) + " tasks=" + std::to_string(r.tasks) +
      " layout=" + value_text(cut(r.layout.empty() ? "dp" : r.layout, kMaxLayout), false) +
      " plan_ms=" + ms_text(r.plan_ms) + " block_ms=" + ms_text(r.block_ms) + " saving=" + saving +
      " spread=" + value_text(r.spread, false) + " digest=" + value_text(r.digest, false) +
      " verdict=" + to_string(r.verdict);
  if (r.verdict != ShadowVerdict::kWouldApply || !r.reason.empty()) {
    line += " reason=" + value_text(cut(r.reason, kMaxReason), true);
  }
  return line;
}

ShadowRecord parse_shadow_line(std::string_view line, const std::string& where) {
  auto bad = [&](const std::string& what) { return Error(ErrorCode::kBadInput, where, what); };
  ShadowRecord r;
  std::size_t i = 0;
  auto word = [&]() {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    return std::string(line.substr(start, i - start));
  };
  r.time = word();
  if (!is_utc_time(r.time)) {
    throw bad("not a shadow line: expected a UTC time (2026-12-07T08:00:00Z) first, found '" +
              cut(r.time, 40) + "'");
  }
  if (word() != "topo-aware" || word() != "shadow") {
    throw bad("not a shadow line: expected 'topo-aware shadow' after the time");
  }
  std::map<std::string, std::string> fields;
  while (true) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    const std::size_t eq = line.find('=', i);
    const std::size_t space = line.find(' ', i);
    if (eq == std::string_view::npos || (space != std::string_view::npos && space < eq)) {
      throw bad("expected key=value, found '" + cut(std::string(line.substr(i, space - i)), 40) +
                "'");
    }
    const std::string key(line.substr(i, eq - i));
    i = eq + 1;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        char c = line[i++];
        if (c == '\\' && i < line.size()) {
          value += line[i++];
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) throw bad(key + ": unterminated quoted value");
    } else {
      const std::size_t end = std::min(line.find(' ', i), line.size());
      value = std::string(line.substr(i, end - i));
      i = end;
    }
    if (!fields.emplace(key, std::move(value)).second) throw bad(key + " given twice");
  }
  auto take = [&](const char* key) {
    auto it = fields.find(key);
    if (it == fields.end()) throw bad(std::string("no ") + key + "=");
    return it->second;
  };
  r.job = number(take("job"), "job", where);
  r.step = number(take("step"), "step", where);
  r.user = take("user");
  r.hosts = number(take("hosts"), "hosts", where);
  r.tasks = number(take("tasks"), "tasks", where);
  r.layout = take("layout");
  r.plan_ms = decimal(take("plan_ms"), "plan_ms", where, false);
  r.block_ms = decimal(take("block_ms"), "block_ms", where, false);
  r.saving_pct = decimal(take("saving"), "saving", where, true);
  r.spread = take("spread");
  r.digest = take("digest");
  const std::string verdict = take("verdict");
  if (verdict == "would-apply") {
    r.verdict = ShadowVerdict::kWouldApply;
  } else if (verdict == "would-refuse") {
    r.verdict = ShadowVerdict::kWouldRefuse;
  } else if (verdict == "error") {
    r.verdict = ShadowVerdict::kError;
  } else {
    throw bad("verdict=" + cut(verdict, 40) + ": expected would-apply, would-refuse or error");
  }
  if (auto it = fields.find("reason"); it != fields.end()) {
    r.reason = it->second;
  } else if (r.verdict != ShadowVerdict::kWouldApply) {
    throw bad(verdict + " without reason=");
  }
  return r;
}

}  // namespace topoaware::launch

// Slurm hostlist expansion and compression (see hostlist.h for why this is not libslurm's).
#include "topoaware/topology/hostlist.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

struct Range {
  std::uint64_t lo = 0, hi = 0;
  int width = 0;  // zero-padded width, 0 = as many digits as needed
};

// One item of a list: literal text interleaved with bracket groups.
struct Segment {
  std::string literal;        // used when ranges is empty
  std::vector<Range> ranges;  // a bracket group
};
using Item = std::vector<Segment>;

constexpr std::size_t kMaxDigits = 18;  // keeps every bound far below 2^63

[[noreturn]] void bad(const std::string& context, std::string_view list, const std::string& why) {
  std::string shown(list.substr(0, 80));
  if (list.size() > 80) shown += "...";
  throw Error(ErrorCode::kBadInput, context, "bad hostlist \"" + shown + "\": " + why);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::uint64_t parse_number(std::string_view s, const std::string& context, std::string_view list) {
  if (s.empty()) bad(context, list, "empty number in a range");
  if (s.size() > kMaxDigits) bad(context, list, "number \"" + std::string(s) + "\" is too long");
  std::uint64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) bad(context, list, "\"" + std::string(s) + "\" is not a number");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

Range parse_range(std::string_view r, const std::string& context, std::string_view list) {
  Range out;
  std::size_t dash = r.find('-');
  std::string_view lo = dash == std::string_view::npos ? r : r.substr(0, dash);
  std::string_view hi = dash == std::string_view::npos ? r : r.substr(dash + 1);
  out.lo = parse_number(lo, context, list);
  out.hi = parse_number(hi, context, list);
  if (out.hi < out.lo) {
    bad(context, list, "range \"" + std::string(r) + "\" runs backwards");
  }
  if (lo.size() > 1 && lo[0] == '0') out.width = static_cast<int>(lo.size());
  return out;
}

// Splits the list into items at top-level commas and parses bracket groups.
std::vector<Item> parse(std::string_view list, const std::string& context) {
  std::vector<Item> items;
  Item cur;
  std::string literal;
  bool any = false;
  auto flush_item = [&] {
    if (!literal.empty()) cur.push_back(Segment{std::move(literal), {}});
    literal.clear();
    if (!cur.empty()) items.push_back(std::move(cur));
    cur.clear();
  };
  for (std::size_t i = 0; i < list.size(); ++i) {
    char c = list[i];
    if (c == ',') {
      flush_item();
      continue;
    }
    if (c == ']') bad(context, list, "']' without '['");
    if (c == '[') {
      std::size_t close = list.find(']', i + 1);
      if (close == std::string_view::npos) bad(context, list, "'[' without ']'");
      std::string_view body = list.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string_view::npos) bad(context, list, "nested '['");
      if (body.empty()) bad(context, list, "empty '[]'");
      Segment group;
      std::size_t start = 0;
      while (start <= body.size()) {
        std::size_t comma = body.find(',', start);
        std::string_view r = body.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        group.ranges.push_back(parse_range(r, context, list));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      if (!literal.empty()) cur.push_back(Segment{std::move(literal), {}});
      literal.clear();
      cur.push_back(std::move(group));
      i = close;
      any = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      bad(context, list, "whitespace inside a hostlist");
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      bad(context, list, "control character in a hostlist");
    }
    literal.push_back(c);
    any = true;
  }
  flush_item();
  (void)any;
  return items;
}

std::size_t saturating_mul(std::size_t a, std::size_t b) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) {
    return std::numeric_limits<std::size_t>::max();
  }
  return a * b;
}
std::size_t saturating_add(std::size_t a, std::size_t b) {
  return b > std::numeric_limits<std::size_t>::max() - a ? std::numeric_limits<std::size_t>::max()
                                                         : a + b;
}

std::size_t group_size(const Segment& s) {
  std::size_t n = 0;
  for (const Range& r : s.ranges) {
    std::uint64_t span = r.hi - r.lo;
    std::size_t k = span >= std::numeric_limits<std::size_t>::max()
                        ? std::numeric_limits<std::size_t>::max()
                        : static_cast<std::size_t>(span) + 1;
    n = saturating_add(n, k);
  }
  return n;
}

std::size_t item_count(const Item& item) {
  std::size_t n = 1;
  for (const Segment& s : item) {
    if (!s.ranges.empty()) n = saturating_mul(n, group_size(s));
  }
  return n;
}

std::size_t total_count(const std::vector<Item>& items) {
  std::size_t n = 0;
  for (const Item& it : items) n = saturating_add(n, item_count(it));
  return n;
}

std::string format_number(std::uint64_t v, int width) {
  std::string digits = std::to_string(v);
  if (static_cast<int>(digits.size()) < width) {
    digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  }
  return digits;
}

void expand_item(const Item& item, std::size_t seg, std::string& prefix,
                 std::vector<std::string>& out) {
  if (seg == item.size()) {
    out.push_back(prefix);
    return;
  }
  const Segment& s = item[seg];
  std::size_t keep = prefix.size();
  if (s.ranges.empty()) {
    prefix += s.literal;
    expand_item(item, seg + 1, prefix, out);
  } else {
    for (const Range& r : s.ranges) {
      for (std::uint64_t v = r.lo;; ++v) {
        prefix += format_number(v, r.width);
        expand_item(item, seg + 1, prefix, out);
        prefix.resize(keep);
        if (v == r.hi) break;
      }
    }
  }
  prefix.resize(keep);
}

// A host name split as prefix + trailing number, for compression.
struct Split {
  std::string prefix;
  std::optional<std::uint64_t> number;
  int digits = 0;
  bool padded = false;  // leading zero: the width is fixed
};

Split split_name(const std::string& name) {
  Split s;
  std::size_t end = name.size();
  std::size_t start = end;
  while (start > 0 && is_digit(name[start - 1])) --start;
  if (start == end || end - start > kMaxDigits) {
    s.prefix = name;
    return s;
  }
  s.prefix = name.substr(0, start);
  s.digits = static_cast<int>(end - start);
  s.padded = s.digits > 1 && name[start] == '0';
  std::uint64_t v = 0;
  for (std::size_t i = start; i < end; ++i) v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  s.number = v;
  return s;
}

}  // namespace

std::size_t hostlist_count(std::string_view list, const std::string& context) {
  return total_count(parse(list, context));
}

std::vector<std::string> expand_hostlist(std::string_view list, const std::string& context,
                                         std::size_t max_hosts) {
  std::vector<Item> items = parse(list, context);
  std::size_t n = total_count(items);
  if (n > max_hosts) {
    std::string shown(list.substr(0, 80));
    if (list.size() > 80) shown += "...";
    throw Error(ErrorCode::kLimit, context,
                "hostlist \"" + shown + "\" names " +
                    (n == std::numeric_limits<std::size_t>::max() ? std::string("too many")
                                                                  : std::to_string(n)) +
                    " hosts, more than the limit of " + std::to_string(max_hosts));
  }
  std::vector<std::string> out;
  out.reserve(n);
  std::string prefix;
  for (const Item& it : items) expand_item(it, 0, prefix, out);
  return out;
}

bool hostname_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && is_digit(a[i2])) ++i2;
      while (j2 < b.size() && is_digit(b[j2])) ++j2;
      std::string_view na = a.substr(i, i2 - i), nb = b.substr(j, j2 - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      if (i2 - i != j2 - j) return i2 - i > j2 - j;  // "n01" before "n1": more padding first
      i = i2;
      j = j2;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  // Runs of consecutive numbers with the same prefix and width become ranges; adjacent runs
  // with the same prefix share one bracket group, as Slurm's ranged_string writes them.
  struct Run {
    std::string prefix;
    std::uint64_t lo = 0, hi = 0;
    int width = 0;  // fixed width (padded) or 0
    bool numbered = false;
    std::string plain;  // a name without a trailing number
  };
  std::vector<Run> runs;
  for (const std::string& h : hosts) {
    Split s = split_name(h);
    if (!s.number) {
      runs.push_back(Run{{}, 0, 0, 0, false, h});
      continue;
    }
    int width = s.padded ? s.digits : 0;
    if (!runs.empty()) {
      Run& r = runs.back();
      if (r.numbered && r.prefix == s.prefix && r.hi + 1 == *s.number) {
        bool fits = r.width == width || (r.width > 0 && !s.padded && s.digits == r.width) ||
                    (r.width == 0 && !s.padded);
        // An unpadded run must not absorb a number whose digits would be ambiguous.
        if (fits) {
          r.hi = *s.number;
          continue;
        }
      }
    }
    runs.push_back(Run{s.prefix, *s.number, *s.number, width, true, {}});
  }
  std::string out;
  for (std::size_t i = 0; i < runs.size();) {
    if (!out.empty()) out += ',';
    const Run& r = runs[i];
    if (!r.numbered) {
      out += r.plain;
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < runs.size() && runs[j].numbered && runs[j].prefix == r.prefix) ++j;
    auto range_text = [](const Run& x) {
      std::string t = format_number(x.lo, x.width);
      if (x.hi != x.lo) t += "-" + format_number(x.hi, x.width);
      return t;
    };
    if (j == i + 1 && r.lo == r.hi) {
      out += r.prefix + format_number(r.lo, r.width);
    } else {
      out += r.prefix + "[";
      for (std::size_t k = i; k < j; ++k) {
        if (k > i) out += ',';
        out += range_text(runs[k]);
      }
      out += "]";
    }
    i = j;
  }
  return out;
}

}  // namespace topoaware::topology

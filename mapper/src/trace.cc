#include "topoaware/mapper/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {
namespace {

// The text's lines with their 1-based numbers; a '\r' before the newline is dropped, blank
// lines are skipped.
struct Line {
  std::size_t number;
  std::string_view text;
};
std::vector<Line> lines_of(std::string_view text) {
  std::vector<Line> out;
  std::size_t number = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    if (!line.empty()) out.push_back({number, line});
    pos = end + 1;
  }
  return out;
}

std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = line.find(sep, pos);
    if (end == std::string_view::npos) {
      out.push_back(line.substr(pos));
      return out;
    }
    out.push_back(line.substr(pos, end - pos));
    pos = end + 1;
  }
}

Error bad(const std::string& source, std::size_t line, const std::string& what) {
  return Error(source + ":" + std::to_string(line) + ": " + what);
}

double number(std::string_view field, const std::string& source, std::size_t line,
              const char* name) {
  double v = 0;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) {
    throw bad(source, line, std::string(name) + " '" + std::string(field) + "' is not a number");
  }
  return v;
}

// Index of each wanted column in a header, by name; throws naming the missing one.
std::vector<std::size_t> columns(const std::vector<std::string_view>& header,
                                 const std::vector<std::string_view>& wanted,
                                 const std::string& source, std::size_t line) {
  std::vector<std::size_t> out;
  for (std::string_view w : wanted) {
    const auto it = std::find(header.begin(), header.end(), w);
    if (it == header.end()) {
      throw bad(source, line, "no column " + std::string(w) + " in the header");
    }
    out.push_back(static_cast<std::size_t>(it - header.begin()));
  }
  return out;
}

void sort_by_submit(Trace& t) {
  std::stable_sort(t.jobs.begin(), t.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
}

// The header's fields and the data lines after it; throws when there is no header.
struct Table {
  std::vector<std::string_view> header;
  std::size_t header_line = 0;
  std::vector<Line> rows;
};
// A data line's fields, as many as the header's (with `trailing_separator`, one empty field
// more is allowed); throws naming the line otherwise.
std::vector<std::string_view> row_fields(const Table& t, const Line& l, char sep,
                                         const std::string& source,
                                         bool trailing_separator = false) {
  const auto f = split(l.text, sep);
  const bool extra_empty = trailing_separator && f.size() == t.header.size() + 1 && f.back().empty();
  if (f.size() != t.header.size() && !extra_empty) {
    throw bad(source, l.number,
              std::to_string(f.size()) + " fields; the header has " +
                  std::to_string(t.header.size()));
  }
  return f;
}

Table table(std::string_view text, char sep, const std::string& source) {
  std::vector<Line> ls = lines_of(text);
  if (ls.empty()) throw bad(source, 1, "empty trace: no header line");
  Table t;
  t.header = split(ls.front().text, sep);
  t.header_line = ls.front().number;
  t.rows.assign(ls.begin() + 1, ls.end());
  return t;
}

void check_job(const TraceJob& j, const std::string& source, std::size_t line) {
  if (!(j.duration > 0)) throw bad(source, line, "job " + j.id + ": duration must be positive");
  if (j.gpus <= 0) throw bad(source, line, "job " + j.id + ": GPUs must be positive");
  if (j.submit < 0) throw bad(source, line, "job " + j.id + ": submit time is negative");
}

int whole(double v, const std::string& source, std::size_t line, const char* name) {
  if (v != std::floor(v) || v < 0 || v > 1e9) {
    throw bad(source, line, std::string(name) + " must be a whole number");
  }
  return static_cast<int>(v);
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// sacct's YYYY-MM-DDTHH:MM:SS as seconds since the epoch (UTC); false for Unknown, None or
// anything else that is not a time.
bool sacct_time(std::string_view s, double& out) {
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':') {
    return false;
  }
  auto field = [&](std::size_t at, std::size_t len, int& v) {
    const auto [ptr, ec] = std::from_chars(s.data() + at, s.data() + at + len, v);
    return ec == std::errc() && ptr == s.data() + at + len;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (!field(0, 4, y) || !field(5, 2, mo) || !field(8, 2, d) || !field(11, 2, h) ||
      !field(14, 2, mi) || !field(17, 2, se)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
  out =
      static_cast<double>(days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d))) *
          86400.0 +
      h * 3600.0 + mi * 60.0 + se;
  return true;
}

// GPUs in an AllocTRES string (cpu=64,mem=512G,node=2,billing=64,gres/gpu=16): the untyped
// gres/gpu count, else the sum of the typed ones; 0 when none.
int tres_gpus(std::string_view tres, const std::string& source, std::size_t line) {
  int untyped = -1, typed = 0;
  for (std::string_view item : split(tres, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key != "gres/gpu" && key.rfind("gres/gpu:", 0) != 0) continue;
    const int n = whole(number(value, source, line, "AllocTRES gres/gpu"), source, line,
                        "AllocTRES gres/gpu");
    if (key == "gres/gpu") {
      untyped = n;
    } else {
      typed += n;
    }
  }
  return untyped >= 0 ? untyped : typed;
}

}  // namespace

std::string_view to_string(TraceFormat f) {
  switch (f) {
    case TraceFormat::kElasticFlow:
      return "elasticflow";
    case TraceFormat::kKalos:
      return "kalos";
    case TraceFormat::kSacct:
      return "sacct";
  }
  return "?";
}

TraceFormat trace_format_from(std::string_view name) {
  for (auto f : {TraceFormat::kElasticFlow, TraceFormat::kKalos, TraceFormat::kSacct}) {
    if (name == to_string(f)) return f;
  }
  throw Error("unknown trace format '" + std::string(name) +
              "' (expected elasticflow, kalos or sacct)");
}

TraceFormat detect_trace_format(std::string_view text, const std::string& source) {
  const std::vector<Line> ls = lines_of(text);
  if (ls.empty()) throw bad(source, 1, "empty trace: no header line");
  const std::string_view head = ls.front().text;
  if (head.find('|') != std::string_view::npos) return TraceFormat::kSacct;
  const std::vector<std::string_view> h = split(head, ',');
  auto has = [&](std::string_view n) { return std::find(h.begin(), h.end(), n) != h.end(); };
  if (has("submission_time") && has("num_gpu")) return TraceFormat::kElasticFlow;
  if (has("arrival_time") && has("gpu_workers")) return TraceFormat::kKalos;
  throw bad(source, ls.front().number,
            "not a trace this reads: expected an ElasticFlow, Kalos converted or sacct "
            "--parsable2 header");
}

Trace read_elasticflow(std::string_view text, const std::string& source) {
  const Table t = table(text, ',', source);
  const auto c = columns(t.header, {"job_id", "submission_time", "duration", "num_gpu"}, source,
                         t.header_line);
  Trace out;
  for (const Line& l : t.rows) {
    const auto f = row_fields(t, l, ',', source);
    TraceJob j;
    j.id = std::string(f[c[0]]);
    j.submit = number(f[c[1]], source, l.number, "submission_time");
    j.duration = number(f[c[2]], source, l.number, "duration");
    j.gpus = whole(number(f[c[3]], source, l.number, "num_gpu"), source, l.number, "num_gpu");
    check_job(j, source, l.number);
    out.jobs.push_back(std::move(j));
  }
  sort_by_submit(out);
  return out;
}

Trace read_kalos(std::string_view text, const std::string& source) {
  const Table t = table(text, ',', source);
  const auto c = columns(
      t.header, {"job_id", "arrival_time", "num_iteration", "gpu_workers", "gpu_per_worker"},
      source, t.header_line);
  Trace out;
  for (const Line& l : t.rows) {
    const auto f = row_fields(t, l, ',', source);
    TraceJob j;
    j.id = std::string(f[c[0]]);
    j.submit = number(f[c[1]], source, l.number, "arrival_time");
    j.duration = number(f[c[2]], source, l.number, "num_iteration") * 0.5;
    const int workers =
        whole(number(f[c[3]], source, l.number, "gpu_workers"), source, l.number, "gpu_workers");
    const int per = whole(number(f[c[4]], source, l.number, "gpu_per_worker"), source, l.number,
                          "gpu_per_worker");
    j.gpus = workers * per;
    check_job(j, source, l.number);
    out.jobs.push_back(std::move(j));
  }
  sort_by_submit(out);
  return out;
}

Trace read_sacct(std::string_view text, const std::string& source) {
  const Table t = table(text, '|', source);
  const auto c =
      columns(t.header, {"JobID", "Submit", "Start", "End", "AllocTRES"}, source, t.header_line);
  Trace out;
  double origin = 0;
  bool have_origin = false;
  for (const Line& l : t.rows) {
    // --parsable2 has no trailing '|'; --parsable has one: one empty field more.
    const auto f = row_fields(t, l, '|', source, /*trailing_separator=*/true);
    const std::string_view id = f[c[0]];
    if (id.empty()) throw bad(source, l.number, "empty JobID");
    if (id.find('.') != std::string_view::npos) {
      ++out.steps_skipped;
      continue;
    }
    double submit = 0, start = 0, end = 0;
    if (!sacct_time(f[c[1]], submit)) {
      throw bad(source, l.number,
                "job " + std::string(id) + ": Submit '" + std::string(f[c[1]]) +
                    "' is not YYYY-MM-DDTHH:MM:SS");
    }
    if (!sacct_time(f[c[2]], start) || !sacct_time(f[c[3]], end) || end < start) {
      ++out.unfinished_skipped;
      continue;
    }
    const int gpus = tres_gpus(f[c[4]], source, l.number);
    if (gpus <= 0) {
      ++out.no_gpu_skipped;
      continue;
    }
    if (!have_origin || submit < origin) origin = submit;
    have_origin = true;
    out.jobs.push_back({std::string(id), submit, std::max(end - start, 1.0), gpus});
  }
  for (TraceJob& j : out.jobs) j.submit -= origin;
  sort_by_submit(out);
  return out;
}

Trace read_trace(std::string_view text, const std::string& source, TraceFormat format) {
  switch (format) {
    case TraceFormat::kElasticFlow:
      return read_elasticflow(text, source);
    case TraceFormat::kKalos:
      return read_kalos(text, source);
    case TraceFormat::kSacct:
      return read_sacct(text, source);
  }
  throw Error("unknown trace format");
}

}  // namespace topoaware::mapper

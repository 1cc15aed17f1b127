// The node doctor's report as JSON: schema "topo-aware-health/1" (docs/doctor.md).
//
// Stable for scripts and the planner: keys in a fixed order, unknown numbers as null (never -1),
// findings most severe first. The reader accepts what the writer writes and ignores keys it does
// not know (a later schema may add some); a wrong type or a missing required key is kBadInput.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <nlohmann/json.hpp>

#include "topoaware/topology/doctor.h"
#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kSchema = "topo-aware-health/1";

ordered_json num_or_null(double v) {
  if (!(v >= 0)) return nullptr;
  // Two decimals are all a sysadmin or the planner needs; keeps golden files stable.
  return ordered_json(std::round(v * 100) / 100);
}
ordered_json int_or_null(int v) { return v >= 0 ? ordered_json(v) : ordered_json(nullptr); }
ordered_json str_or_null(const std::string& s) {
  return s.empty() ? ordered_json(nullptr) : ordered_json(s);
}

Severity severity_from(const std::string& s, const std::string& where) {
  if (s == "ok") return Severity::kOk;
  if (s == "warning") return Severity::kWarning;
  if (s == "critical") return Severity::kCritical;
  throw Error(ErrorCode::kBadInput, where, "unknown severity '" + s + "'");
}

CheckStatus status_from(const std::string& s, const std::string& where) {
  if (s == "skipped") return CheckStatus::kSkipped;
  switch (severity_from(s, where)) {
    case Severity::kOk:
      return CheckStatus::kOk;
    case Severity::kWarning:
      return CheckStatus::kWarning;
    case Severity::kCritical:
      return CheckStatus::kCritical;
  }
  return CheckStatus::kOk;
}

std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  return it->get<std::string>();
}
double dbl(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  return it->get<double>();
}
int integer(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  return it->get<int>();
}
// An optional array member; present but not an array is an error naming the key.
const nlohmann::json& array(const nlohmann::json& j, const char* key, const std::string& where) {
  static const nlohmann::json empty = nlohmann::json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return empty;
  if (!it->is_array())
    throw Error(ErrorCode::kBadInput, where, std::string(key) + " is not an array");
  return *it;
}

}  // namespace

std::string health_report_to_json(const HealthReport& r) {
  ordered_json j;
  j["schema"] = kSchema;
  j["host"] = str_or_null(r.host);
  j["source"] = str_or_null(r.source);
  j["time"] = r.time;
  j["status"] = r.status();
  ordered_json checks = ordered_json::array();
  for (const CheckResult& c : r.checks) {
    ordered_json x;
    x["id"] = c.id;
    x["status"] = to_string(c.status);
    x["examined"] = c.examined;
    x["note"] = str_or_null(c.note);
    checks.push_back(std::move(x));
  }
  j["checks"] = std::move(checks);
  ordered_json findings = ordered_json::array();
  for (const Finding& f : r.findings) {
    ordered_json x;
    x["check"] = f.check;
    x["severity"] = to_string(f.severity);
    x["device"] = f.device;
    x["busid"] = str_or_null(f.busid);
    x["kind"] = f.kind;
    x["port"] = int_or_null(f.port);
    x["measured"] = f.measured;
    x["expected"] = f.expected;
    x["measured_gbps"] = num_or_null(f.measured_gbps);
    x["expected_gbps"] = num_or_null(f.expected_gbps);
    x["affects"] = f.affects;
    x["action"] = f.action;
    findings.push_back(std::move(x));
  }
  j["findings"] = std::move(findings);
  ordered_json affinity = ordered_json::array();
  for (const AffinityRow& a : r.affinity) {
    ordered_json x;
    x["gpu"] = a.gpu;
    x["busid"] = str_or_null(a.busid);
    x["nics"] = a.nics;
    x["path"] = str_or_null(a.path);
    x["gbps"] = num_or_null(a.gbps);
    affinity.push_back(std::move(x));
  }
  j["affinity"] = std::move(affinity);
  ordered_json counters = ordered_json::array();
  for (const CounterSnapshot& c : r.counters) {
    ordered_json x;
    x["device"] = c.device;
    x["port"] = int_or_null(c.port);
    ordered_json values = ordered_json::object();
    for (const auto& [k, v] : c.values) values[k] = v;
    x["values"] = std::move(values);
    counters.push_back(std::move(x));
  }
  j["counters"] = std::move(counters);
  j["notes"] = r.notes;
  return j.dump(2) + "\n";
}

HealthReport health_report_from_json(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kBadInput, where, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("schema", std::string()) != kSchema) {
    throw Error(ErrorCode::kBadInput, where,
                "not a topo-aware health report (schema " + std::string(kSchema) + ")");
  }
  HealthReport r;
  try {
    r.host = str(j, "host");
    r.source = str(j, "source");
    r.time = j.value("time", std::int64_t{0});
    for (const auto& c : array(j, "checks", where)) {
      CheckResult x;
      x.id = c.at("id").get<std::string>();
      x.status = status_from(c.at("status").get<std::string>(), where);
      x.examined = std::max(0, integer(c, "examined"));
      x.note = str(c, "note");
      r.checks.push_back(std::move(x));
    }
    for (const auto& f : array(j, "findings", where)) {
      Finding x;
      x.check = f.at("check").get<std::string>();
      x.severity = severity_from(f.at("severity").get<std::string>(), where);
      x.device = f.at("device").get<std::string>();
      x.busid = str(f, "busid");
      x.kind = str(f, "kind");
      x.port = integer(f, "port");
      x.measured = str(f, "measured");
      x.expected = str(f, "expected");
      x.measured_gbps = dbl(f, "measured_gbps");
      x.expected_gbps = dbl(f, "expected_gbps");
      for (const auto& a : array(f, "affects", where)) x.affects.push_back(a.get<std::string>());
      x.action = str(f, "action");
      r.findings.push_back(std::move(x));
    }
    for (const auto& a : array(j, "affinity", where)) {
      AffinityRow x;
      x.gpu = a.at("gpu").get<std::string>();
      x.busid = str(a, "busid");
      for (const auto& n : array(a, "nics", where)) x.nics.push_back(n.get<std::string>());
      x.path = str(a, "path");
      x.gbps = std::max(0.0, dbl(a, "gbps"));
      r.affinity.push_back(std::move(x));
    }
    for (const auto& c : array(j, "counters", where)) {
      CounterSnapshot x;
      x.device = c.at("device").get<std::string>();
      x.port = integer(c, "port");
      for (const auto& [k, v] : c.at("values").items()) x.values[k] = v.get<std::uint64_t>();
      r.counters.push_back(std::move(x));
    }
    for (const auto& n : array(j, "notes", where)) r.notes.push_back(n.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBadInput, where, std::string("malformed health report: ") + e.what());
  }
  return r;
}

}  // namespace topoaware::topology

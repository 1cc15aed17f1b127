// The shadow line: what srun writes for each step in shadow mode (docs/spank.md, "Shadow mode"),
// and what `topo-aware shadow-report` reads back. One line a step, `key=value` fields after a
// fixed head, so an admin can grep and cut it as well as the report can read it:
//
//   2026-12-07T08:00:00Z topo-aware shadow job=123 step=0 user=alice hosts=4 tasks=32
//     layout=tp=8,pp=2 plan_ms=1.234 block_ms=2.345 saving=47.4% spread=leaf:2/1,spine:1/1
//     digest=0123456789abcdef verdict=would-apply
//
// (on one line). The writer and the reader live here together, so the format has one definition
// and a round-trip test. Readers ignore keys they do not know: a later version may add fields at
// the end, never rename or drop one. Errors are thrown as topology::Error naming where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::launch {

// What apply mode would have done with the step.
enum class ShadowVerdict {
  kWouldApply,   // planned: the step would have run with the plan
  kWouldRefuse,  // the step would not have run: a request no launch can honour, or a failure
                 // under policy fail-closed
  kError,        // topo-aware could not plan it; under fail-open it would have run unmodified
};
const char* to_string(ShadowVerdict verdict);  // "would-apply", "would-refuse", "error"

struct ShadowRecord {
  std::string time;  // UTC, "2026-12-07T08:00:00Z"
  std::uint32_t job = 0;
  std::uint32_t step = 0;
  std::string user;
  std::uint32_t hosts = 0;  // the step's
  std::uint32_t tasks = 0;
  std::string layout;  // the SPEC without `shadow` ("" written as "dp": plain data parallel)
  // srun's plan of the step and Slurm's block order, modeled ms of communication the step waits
  // for, and the saving of the one over the other (saving_percent); unset where srun made no plan
  // (written "-").
  std::optional<double> plan_ms;
  std::optional<double> block_ms;
  std::optional<double> saving_pct;
  // Per locality level above the host, groups the allocation spans / the fewest that could hold
  // it ("leaf:2/1,spine:1/1"); "-" where not judged (no fabric, or hosts unknown).
  std::string spread = "-";
  std::string digest = "-";  // the inputs' hash (16 hex digits), "-" where srun read none
  ShadowVerdict verdict = ShadowVerdict::kWouldApply;
  std::string reason;  // for would-refuse and error
};

// One locality level above the host (leaf, spine, ...) of an allocation: the groups it spans, and
// the fewest groups that could hold as many usable hosts.
struct SpreadLevel {
  std::string level;
  std::size_t used = 0;
  std::size_t fewest = 0;
};
// The line's `spread=` field: "leaf:2/1,spine:1/1" (used/fewest), "-" for no level.
std::string format_spread(const std::vector<SpreadLevel>& spread);
// Its levels back; items that do not read as level:used/fewest are left out.
std::vector<SpreadLevel> parse_spread(std::string_view text);

// The saving of a plan over Slurm's order, in percent of Slurm's order (positive: the plan's
// communication is shorter); 0 when Slurm's order costs nothing. srun's -v summary prints the
// same figure with the opposite sign, as the plan's change.
double saving_percent(double plan_seconds, double block_seconds);

// The line, without its newline. Long layouts and reasons are cut (with "..."), so a line stays
// well under 4 KiB and one write() appends it whole.
std::string format_shadow_line(const ShadowRecord& record);

// Reads one line; throws topology::Error naming `where` (file:line) and what is wrong.
ShadowRecord parse_shadow_line(std::string_view line, const std::string& where);

}  // namespace topoaware::launch

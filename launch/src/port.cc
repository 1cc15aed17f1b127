// MASTER_PORT from the job and step ids (port.h).
#include "topoaware/launch/port.h"

#include <algorithm>
#include <fstream>
#include <utility>
#include <vector>

namespace topoaware::launch {

PortRange ephemeral_ports(const std::string& path) {
  PortRange range;
  std::ifstream in(path);
  int first = 0, last = 0;
  if (in >> first >> last && first >= 1 && first <= last && last <= 65535) {
    range.first = first;
    range.last = last;
  }
  return range;
}

int master_port(std::uint32_t job_id, std::uint32_t step_id, PortRange ephemeral) {
  // The window: [low, 65535] without the ephemeral range, as up to two runs of ports.
  auto window = [&](int low) {
    std::vector<std::pair<int, int>> runs;
    if (ephemeral.first > low) runs.emplace_back(low, std::min(ephemeral.first - 1, 65535));
    if (ephemeral.last < 65535) runs.emplace_back(std::max(ephemeral.last + 1, low), 65535);
    return runs;
  };
  auto size = [](const std::vector<std::pair<int, int>>& runs) {
    long long n = 0;
    for (const auto& [a, b] : runs) n += b >= a ? b - a + 1 : 0;
    return n;
  };
  std::vector<std::pair<int, int>> runs = window(20000);
  if (size(runs) < 1024) runs = window(1024);
  const long long n = size(runs);
  if (n <= 0) return 20000;  // an ephemeral range of the whole port space: nothing is outside it
  long long i = static_cast<long long>((std::uint64_t{job_id} * 64 + step_id) %
                                       static_cast<std::uint64_t>(n));
  for (const auto& [a, b] : runs) {
    const long long len = b >= a ? b - a + 1 : 0;
    if (i < len) return static_cast<int>(a + i);
    i -= len;
  }
  return runs.front().first;
}

}  // namespace topoaware::launch

// The node doctor's reports fed to the plan: what a degraded host's NICs can still carry, as a
// fraction of their nominal capacity, applied to the fabric the mapper routes over. A port that
// trained at 1X (100 of 400 Gb/s), an HCA behind a PCIe link at half its width, a port down:
// the mapper then models that host's traffic through that NIC at what it measured, keeps the
// heavy dims off it, and the lower bound accounts for it.
//
// Only NIC capacities are modelled (rdma.rate, rdma.port, and pcie.link findings whose link
// carries a NIC's traffic); other findings (a GPU's own PCIe link, NVLink lanes, affinity, error
// counters) are reported, not modelled, and say so. Pure functions; throws nothing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "topoaware/topology/doctor.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::topology {

// A NIC's capacity as a host's report measured it.
struct NicHealth {
  std::string nic;        // mlx5_6
  double fraction = 1.0;  // of its nominal capacity, in (0, 1]
  std::string what;       // "mlx5_6 at 100 of 400 Gb/s"
};

// The NICs a report says carry less than nominal (the lowest reading per NIC). `node` (the
// host's model, may be null) gives a NIC's own speed, so that a PCIe link slower than its slot
// is judged against what the NIC can send, not against the slot. A port down is modelled at a
// hundredth of its capacity (NCCL leaves it out; its GPU's traffic would take another path).
std::vector<NicHealth> nic_health(const HealthReport& report, const NodeTopology* node);

// Sets HostInfo::nic_fraction of the hosts whose NICs `health` lists (host name -> its NICs).
// Returns one line per degraded host, for the user: "node3: mlx5_6 at 100 of 400 Gb/s".
std::vector<std::string> apply_health(Fabric& fabric,
                                      const std::map<std::string, std::vector<NicHealth>>& health);

// The same as one compact text, for handing over (srun to the nodes): "node3:mlx5_6=0.25,...;"
// and back. parse_health() throws topology::Error naming `where` on malformed text.
std::string health_text(const std::map<std::string, std::vector<NicHealth>>& health);
std::map<std::string, std::vector<NicHealth>> parse_health(const std::string& text,
                                                           const std::string& where);

}  // namespace topoaware::topology

// MASTER_PORT for a step: rank 0's host listens there (torch's TCPStore, gloo, JAX's coordinator),
// so two steps of one job that run at once need two ports, and a port the kernel may hand out as
// the local end of some connection (the ephemeral range) can be taken when rank 0 binds it. The
// port is derived from the job id and the step id, outside the ephemeral range of the machine that
// derives it: srun, which hands it to every node (so that all agree), and `topo-aware map` offline.
#pragma once

#include <cstdint>
#include <string>

namespace topoaware::launch {

struct PortRange {
  int first = 32768;  // Linux's default ip_local_port_range
  int last = 60999;
};

// The kernel's ephemeral range (two numbers in `path`); Linux's default when it cannot be read.
PortRange ephemeral_ports(const std::string& path = "/proc/sys/net/ipv4/ip_local_port_range");

// A port in 20000-65535 outside `ephemeral` (1024-65535 when that leaves fewer than 1024): the
// steps of one job get consecutive ports of that window (distinct while a job has fewer steps
// than the window has ports), and consecutive jobs start 64 ports apart.
int master_port(std::uint32_t job_id, std::uint32_t step_id, PortRange ephemeral);

}  // namespace topoaware::launch

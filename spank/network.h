// What this node's network says, for the variables rendezvous needs: whether a name resolves here,
// and which interface reaches an address. Node-local by nature: only MASTER_ADDR's form and
// GLOO_SOCKET_IFNAME depend on it, never the plan.
#pragma once

#include <string>

namespace topoaware::spank {

// Whether `name` resolves here (getaddrinfo, any family).
bool resolves(const std::string& name);

// The interface whose address this node would use to reach `host` (a name or a numeric address):
// the route a connected UDP socket takes (no packet is sent), matched against the interfaces'
// addresses. Empty when `host` does not resolve or no interface matches.
std::string interface_towards(const std::string& host);

}  // namespace topoaware::spank

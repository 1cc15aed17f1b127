// This node's view of names and routes (network.h).
#include "network.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "topoaware/launch/fd.h"

namespace topoaware::spank {

using launch::Fd;

bool resolves(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (res != nullptr) ::freeaddrinfo(res);
  return rc == 0;
}

std::string interface_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return {};
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  bool routed = false;
  {
    Fd s(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    routed = s.fd >= 0 && ::connect(s.fd, res->ai_addr, res->ai_addrlen) == 0 &&
             ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  }
  ::freeaddrinfo(res);
  if (!routed) return {};
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return {};
  std::string name;
  for (ifaddrs* i = ifs; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
    if (local.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      const auto* b = reinterpret_cast<const sockaddr_in*>(&local);
      if (a->sin_addr.s_addr == b->sin_addr.s_addr) name = i->ifa_name;
    } else if (local.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      const auto* b = reinterpret_cast<const sockaddr_in6*>(&local);
      if (std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0) name = i->ifa_name;
    }
  }
  ::freeifaddrs(ifs);
  return name;
}

}  // namespace topoaware::spank

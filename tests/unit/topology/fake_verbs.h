// A fake libibverbs behind the VerbsApi seam: HCAs this machine does not have.
//
// VerbsApi holds plain C function pointers, so the fake's state lives in one active instance
// that static functions read. Device and context handles point into the fake's own storage; the
// code under test only passes them back. Port attributes use verbs.h's codes.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/topology/rdma_source.h"

namespace topoaware::test {

struct FakePort {
  ibv_port_state state = IBV_PORT_ACTIVE;
  std::uint8_t speed = 128;  // NDR
  std::uint8_t width = 2;    // 4x
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
};

struct FakeHca {
  std::string name;
  std::uint64_t guid = 0;  // host order; the fake stores it big-endian as verbs does
  std::vector<FakePort> ports;
  bool open_fails = false;
};

class FakeVerbs {
 public:
  std::vector<FakeHca> hcas;
  bool list_fails = false;
  int opened = 0, closed = 0, freed = 0;

  topology::VerbsApi api() {
    active() = this;
    handles_.assign(hcas.size() + 1, 0);
    topology::VerbsApi a;
    a.get_device_list = [](int* n) -> ibv_device** {
      FakeVerbs* f = active();
      if (f->list_fails) return nullptr;
      f->list_.clear();
      for (auto& h : f->handles_) f->list_.push_back(reinterpret_cast<ibv_device*>(&h));
      f->list_.back() = nullptr;
      *n = static_cast<int>(f->hcas.size());
      return f->list_.data();
    };
    a.free_device_list = [](ibv_device**) { ++active()->freed; };
    a.get_device_name = [](ibv_device* d) { return active()->hca(d).name.c_str(); };
    a.open_device = [](ibv_device* d) -> ibv_context* {
      if (active()->hca(d).open_fails) return nullptr;
      ++active()->opened;
      return reinterpret_cast<ibv_context*>(d);
    };
    a.close_device = [](ibv_context*) {
      ++active()->closed;
      return 0;
    };
    a.query_device = [](ibv_context* c, ibv_device_attr* attr) {
      const FakeHca& h = active()->hca(reinterpret_cast<ibv_device*>(c));
      *attr = {};
      attr->node_guid = htobe64(h.guid);
      attr->phys_port_cnt = static_cast<std::uint8_t>(h.ports.size());
      return 0;
    };
    a.query_port = [](ibv_context* c, std::uint8_t port, ibv_port_attr* attr) {
      const FakeHca& h = active()->hca(reinterpret_cast<ibv_device*>(c));
      if (port < 1 || port > h.ports.size()) return 22;  // EINVAL, as the provider says
      const FakePort& p = h.ports[port - 1u];
      *attr = {};
      attr->state = p.state;
      attr->active_speed = p.speed;
      attr->active_width = p.width;
      attr->link_layer = p.link_layer;
      return 0;
    };
    return a;
  }

  // The verbs view of tests/fixtures/sysfs/dgx-h100: mlx5_0..7 NDR InfiniBand, mlx5_8/9 HDR-rate
  // Ethernet (RoCE) storage ports.
  static FakeVerbs dgx_h100() {
    FakeVerbs f;
    for (int k = 0; k < 10; ++k) {
      FakeHca h;
      h.name = "mlx5_" + std::to_string(k);
      h.guid = 0x946dae0300a1b2c0ull + static_cast<std::uint64_t>(k < 8 ? k : 0x10 + k - 8);
      FakePort p;
      if (k >= 8) {
        p.speed = 64;  // HDR signalling, 200 Gb/s
        p.link_layer = IBV_LINK_LAYER_ETHERNET;
      }
      h.ports.push_back(p);
      f.hcas.push_back(std::move(h));
    }
    return f;
  }

 private:
  static FakeVerbs*& active() {
    static FakeVerbs* a = nullptr;
    return a;
  }
  const FakeHca& hca(ibv_device* d) const {
    auto i = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t*>(d) -
                                      const_cast<std::uintptr_t*>(handles_.data()));
    return hcas.at(i);
  }
  std::vector<std::uintptr_t> handles_;
  std::vector<ibv_device*> list_;
};

}  // namespace topoaware::test

// A file descriptor closed when it goes out of scope (the plugin's file I/O never leaks one into
// slurmstepd, whatever throws).
#pragma once

#include <unistd.h>

namespace topoaware::spank {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace topoaware::spank

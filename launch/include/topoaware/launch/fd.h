// A file descriptor closed when it goes out of scope: file I/O done inside slurmstepd (the
// plugin's, and this library's on its behalf) never leaks one, whatever throws.
#pragma once

#include <unistd.h>

namespace topoaware::launch {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace topoaware::launch

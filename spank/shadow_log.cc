// The shadow line's I/O on srun (shadow_log.h).
#include "shadow_log.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace topoaware::spank {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[32] = "1970-01-01T00:00:00Z";
  if (gmtime_r(&now, &tm) != nullptr) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string user_name() {
  const uid_t uid = ::getuid();
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr && *found->pw_name != '\0') {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string append_line(const std::string& path, const std::string& line) {
  // No O_CREAT: the admin creates the log (and says who may append to it). O_NONBLOCK: a FIFO
  // put there must not hang srun; O_NOFOLLOW: a link is not the admin's file.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  std::string why;
  struct stat st {};
  const std::string text = line + "\n";
  if (::fstat(fd, &st) != 0) {
    why = path + ": " + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = path + ": not a regular file";
  } else {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      why = path + ": " + std::strerror(errno);
    } else if (static_cast<std::size_t>(n) != text.size()) {
      why = path + ": short write (" + std::to_string(n) + " of " + std::to_string(text.size()) +
            " bytes)";
    }
  }
  ::close(fd);
  return why;
}

}  // namespace topoaware::spank

// The per-job directory (job_dir.h).
#include "job_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "topoaware/launch/fd.h"

namespace topoaware::spank {

using launch::Fd;
namespace {

[[noreturn]] void fail_local(const std::string& what) {
  throw NodeLocalError(what + ": " + std::strerror(errno));
}

}  // namespace

// With the calling (job) user's identity: the base is opened without following symlinks, the
// per-job directory is created 0700 (or reused only when it is a real directory owned by this user
// with that mode), and the file is created exclusively with O_NOFOLLOW, 0644.
std::string write_job_file(const std::string& base, std::uint32_t job_id,
                           const std::string& file_name, const std::string& text,
                           std::string* dir_path) {
  Fd basefd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (basefd.fd < 0) fail_local("job_dir " + base);
  const std::string job = std::to_string(job_id);
  *dir_path = base + "/" + job;
  if (::mkdirat(basefd.fd, job.c_str(), 0700) != 0 && errno != EEXIST) {
    fail_local("job_dir " + *dir_path);
  }
  Fd dirfd(::openat(basefd.fd, job.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd.fd < 0) fail_local("job_dir " + *dir_path);
  struct stat st {};
  if (::fstat(dirfd.fd, &st) != 0) fail_local("job_dir " + *dir_path);
  if (st.st_uid != ::geteuid()) {
    throw NodeLocalError("job_dir " + *dir_path + " is owned by uid " + std::to_string(st.st_uid) +
                         ", not the job's user");
  }
  if ((st.st_mode & 07777) != 0700 && ::fchmod(dirfd.fd, 0700) != 0) {
    fail_local("job_dir " + *dir_path);
  }
  // A file left by an earlier step with the same name (a restarted controller reuses job ids) is
  // replaced; O_EXCL then guarantees we write a file we created.
  ::unlinkat(dirfd.fd, file_name.c_str(), 0);
  Fd file(::openat(dirfd.fd, file_name.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.fd < 0) fail_local(*dir_path + "/" + file_name);
  if (::fchmod(file.fd, 0644) != 0) fail_local(*dir_path + "/" + file_name);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(file.fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_local(*dir_path + "/" + file_name);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return *dir_path + "/" + file_name;
}

void remove_job_file(const std::string& dir_path, const std::string& file_name) {
  if (dir_path.empty()) return;
  Fd dirfd(::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd.fd >= 0 && !file_name.empty()) ::unlinkat(dirfd.fd, file_name.c_str(), 0);
  // ENOTEMPTY is fine: another step or node may still use it.
  ::rmdir(dir_path.c_str());
}

int make_job_dir_base(const std::string& base) {
  if (::mkdir(base.c_str(), 01777) == 0) {
    ::chmod(base.c_str(), 01777);  // past the umask
    return 0;
  }
  return errno == EEXIST ? 0 : -1;
}

}  // namespace topoaware::spank

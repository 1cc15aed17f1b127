// Driving scontrol for `doctor --slurm` (slurm_node.h).
#include "slurm_node.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace topoaware::cli {
namespace {

constexpr int kScontrolTimeoutS = 20;        // three calls at most, inside slurmd's 60 s
constexpr std::size_t kMaxStderr = 1 << 16;  // a program's complaint, not its output
constexpr std::size_t kMaxReason = 200;

std::string short_name(std::string h) {
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h;
}

// The value of `key=` in scontrol's one-line node record: up to the next space, or for Reason
// everything up to its " [user@time]" stamp (a reason may hold spaces).
std::string field(const std::string& record, const std::string& key) {
  std::string needle = key + "=";
  std::size_t at = record.rfind(" " + needle) != std::string::npos ? record.rfind(" " + needle) + 1
                   : record.rfind(needle, 0) == 0                  ? 0
                                                                   : std::string::npos;
  if (at == std::string::npos) return {};
  std::size_t from = at + needle.size();
  if (key != "Reason") return record.substr(from, record.find_first_of(" \n", from) - from);
  std::size_t end = record.find(" [", from);
  if (end == std::string::npos) end = record.find('\n', from);
  return record.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

bool contains(const std::string& s, const char* word) { return s.find(word) != std::string::npos; }

}  // namespace

ProgramRun run_program(const std::vector<std::string>& argv, int timeout_s, bool quiet) {
  ProgramOptions o;
  o.timeout_s = timeout_s;
  o.stderr_to = quiet ? StderrTo::kNull : StderrTo::kTerminal;
  return run_program(argv, o);
}

ProgramRun run_program(const std::vector<std::string>& argv, const ProgramOptions& o) {
  const int timeout_s = o.timeout_s;
  ProgramRun r;
  if (argv.empty() || argv[0].empty()) {
    r.error = "no program";
    return r;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    r.error = std::string("pipe: ") + strerror(errno);
    return r;
  }
  int err_fds[2];
  if (pipe(err_fds) != 0) {
    close(fds[0]);
    close(fds[1]);
    r.error = std::string("pipe: ") + strerror(errno);
    return r;
  }
  int text_fds[2] = {-1, -1};  // the program's stderr, when captured
  if (o.stderr_to == StderrTo::kCapture && pipe(text_fds) != 0) {
    for (int fd : {fds[0], fds[1], err_fds[0], err_fds[1]}) close(fd);
    r.error = std::string("pipe: ") + strerror(errno);
    return r;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + strerror(errno);
    for (int fd : {fds[0], fds[1], err_fds[0], err_fds[1], text_fds[0], text_fds[1]}) {
      if (fd >= 0) close(fd);
    }
    return r;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    if (text_fds[1] >= 0) {
      dup2(text_fds[1], STDERR_FILENO);
      close(text_fds[0]);
      close(text_fds[1]);
    }
    if (o.stderr_to == StderrTo::kNull) {
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) {
        dup2(null, STDERR_FILENO);
        close(null);
      }
    }
    close(fds[0]);
    close(fds[1]);
    close(err_fds[0]);
    fcntl(err_fds[1], F_SETFD, FD_CLOEXEC);
    execvp(args[0], args.data());
    int e = errno;
    ssize_t ignored = write(err_fds[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  close(fds[1]);
  close(err_fds[1]);
  if (text_fds[1] >= 0) close(text_fds[1]);
  int exec_errno = 0;
  if (read(err_fds[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno)) {
    r.error = argv[0] + ": " + strerror(exec_errno);
  }
  close(err_fds[0]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  char buf[4096];
  // stdout, and stderr when captured, read as they come until both close.
  pollfd p[2] = {{fds[0], POLLIN, 0}, {text_fds[0], POLLIN, 0}};
  const nfds_t streams = text_fds[0] >= 0 ? 2 : 1;
  for (;;) {
    if (p[0].fd < 0 && (streams == 1 || p[1].fd < 0)) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(p, streams, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    for (nfds_t i = 0; i < streams; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      ssize_t got = read(p[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        continue;
      }
      std::string& into = i == 0 ? r.out : r.err;
      const std::size_t cap = i == 0 ? o.max_output : kMaxStderr;
      const auto bytes = static_cast<std::size_t>(got);
      if (i == 0 && into.size() + bytes > cap) r.truncated = true;
      if (into.size() < cap) into.append(buf, std::min(bytes, cap - into.size()));
    }
  }
  for (const pollfd& q : p) {
    if (q.fd >= 0) close(q.fd);
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    r.error = argv[0] + ": no answer within " + std::to_string(timeout_s) + " s";
    return r;
  }
  if (r.error.empty()) r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurm_node_name(const std::string& option, const std::string& model_hostname) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("SLURMD_NODENAME"); env != nullptr && *env != '\0') {
    return env;
  }
  if (!model_hostname.empty()) return short_name(model_hostname);
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) == 0) return short_name(buf);
  return {};
}

std::string drain_reason(const topology::HealthReport& report) {
  std::vector<const topology::Finding*> critical;
  for (const auto& f : report.findings) {
    if (f.severity == topology::Severity::kCritical) critical.push_back(&f);
  }
  if (critical.empty()) return {};
  std::string more =
      critical.size() > 1 ? " (+" + std::to_string(critical.size() - 1) + " more)" : "";
  std::string text = topology::finding_line(*critical.front());
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  std::string reason = std::string(kReasonLeader) + " " + text;
  if (reason.size() + more.size() > kMaxReason)
    reason.resize(kMaxReason - more.size() - 3), reason += "...";
  return reason + more;
}

SlurmAction apply_to_slurm(const topology::HealthReport& report, const std::string& node,
                           const std::string& scontrol, bool resume_own) {
  SlurmAction a;
  ProgramRun show = run_program({scontrol, "-o", "show", "node", node}, kScontrolTimeoutS);
  std::string state, reason;
  if (show.rc == 0) {
    state = field(show.out, "State");
    reason = field(show.out, "Reason");
  }
  bool ours = reason.rfind(kReasonLeader, 0) == 0;
  bool out_of_service = contains(state, "DRAIN") || contains(state, "DOWN") ||
                        contains(state, "FAIL") || contains(state, "MAINT");
  if (report.worst() == topology::Severity::kCritical) {
    if (out_of_service && !reason.empty() && !ours) {
      a.did =
          "left " + node + " as it is: already " + state + " for another reason (" + reason + ")";
      return a;
    }
    if (contains(state, "DOWN")) {
      a.did = "left " + node + " as it is: DOWN (not responding)";
      return a;
    }
    std::string why = drain_reason(report);
    ProgramRun r =
        run_program({scontrol, "update", "nodename=" + node, "state=drain", "reason=" + why},
                    kScontrolTimeoutS);
    if (r.rc != 0) {
      a.failed = true;
      a.did = "could not drain " + node + ": " +
              (r.error.empty() ? scontrol + " exited " + std::to_string(r.rc) : r.error);
      return a;
    }
    a.did = "drained " + node + ": " + why;
    return a;
  }
  if (resume_own && out_of_service && ours && !contains(state, "DOWN")) {
    ProgramRun r =
        run_program({scontrol, "update", "nodename=" + node, "state=resume"}, kScontrolTimeoutS);
    if (r.rc != 0) {
      a.failed = true;
      a.did = "could not resume " + node + ": " +
              (r.error.empty() ? scontrol + " exited " + std::to_string(r.rc) : r.error);
      return a;
    }
    a.did = "resumed " + node + " (topo-aware had drained it: " + reason + ")";
    return a;
  }
  if (show.rc != 0 && !show.error.empty()) {
    a.did = "left " + node + " as it is (" + show.error + ")";
  } else {
    a.did = "left " + node + " as it is" + (out_of_service ? " (" + state + ")" : "");
  }
  return a;
}

}  // namespace topoaware::cli

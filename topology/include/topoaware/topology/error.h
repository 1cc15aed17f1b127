// Errors of the topology library.
//
// The topology library reports failure by throwing topoaware::topology::Error: parsers and
// discovery are deep call chains where a return code would have to be threaded through every
// level, and every caller (CLI main, SPANK facade) catches at one place. An Error carries a code
// (what kind of failure, so callers can map it to exit codes), a message, and a context naming
// the file and line, option or host it is about. Nothing in this library exits or prints.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace topoaware::topology {

enum class ErrorCode {
  kBadInput,     // a file or string that does not parse or violates a rule
  kNotFound,     // a named file, host, device does not exist
  kUnsupported,  // valid, but a format or feature we do not handle
  kSystem,       // an OS call failed (permissions, I/O)
  kLimit,        // a size or count bound was exceeded (hostile or absurd input)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string context, const std::string& message)
      : std::runtime_error(context.empty() ? message : context + ": " + message),
        code_(code),
        context_(std::move(context)) {}

  ErrorCode code() const noexcept { return code_; }
  // "file:line", "file", "--option", "host" ... or empty.
  const std::string& context() const noexcept { return context_; }

 private:
  ErrorCode code_;
  std::string context_;
};

// "path:line" when line > 0, else "path".
std::string where(const std::string& path, long line = 0);

}  // namespace topoaware::topology

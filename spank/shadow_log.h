// What srun needs to write a shadow line (launch/shadow.h) for a step: the time, the user, and
// the append itself. srun runs as the job's user, so the admin's shadow_log must be writable by
// every user; srun appends, it never creates the file (docs/spank.md, "Shadow mode").
#pragma once

#include <string>

namespace topoaware::spank {

// Now, in UTC: "2026-12-07T08:00:00Z".
std::string utc_now();
// The name of the user this process runs as, else its uid.
std::string user_name();
// Appends `line` and a newline to the regular file `path` in one write() (O_APPEND: lines of
// concurrent steps do not interleave). Returns an empty string, or why it could not.
std::string append_line(const std::string& path, const std::string& line);

}  // namespace topoaware::spank

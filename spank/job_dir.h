// The per-job directory on each node (job_dir/<job id>/), where the node's NCCL topology XML is
// written as the job's user: no symlink is followed, the directory is 0700 and the user's own, the
// file 0644 and created afresh. A failure here concerns this node only (NodeLocalError): the plan
// every node computes still stands.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace topoaware::spank {

struct NodeLocalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `text` as <base>/<job_id>/<file_name>; returns its path and sets
// *dir_path to the per-job directory. Throws NodeLocalError naming the path and errno's reason.
std::string write_job_file(const std::string& base, std::uint32_t job_id,
                           const std::string& file_name, const std::string& text,
                           std::string* dir_path);

// Creates `base` (root, 01777, like /tmp) when it is missing, so that each job's user can create
// its own 0700 directory there and nobody can remove another's. Call as root. 0, or -1.
int make_job_dir_base(const std::string& base);

// Removes the file and then the directory when it is empty (other steps or nodes sharing the
// filesystem may still use it). Never throws.
void remove_job_file(const std::string& dir_path, const std::string& file_name);

}  // namespace topoaware::spank

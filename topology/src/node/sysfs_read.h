// Bounded, root-confined reading of a sysfs tree (the real /sys or a fake one under a test root).
//
// Private to the topology library. Discovery must survive whatever a kernel (or a hostile fake
// tree) puts there: every read is size-bounded, directory listings are capped, symlinks are
// resolved component by component inside the root (an absolute target means "inside the root",
// ".." never climbs above it, a loop ends after a fixed number of hops), and nothing throws for a
// file that is absent or unreadable: callers get std::nullopt and decide what to note.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::topology::sysfs {

namespace fs = std::filesystem;

// The first line of a small file, trailing whitespace removed; nullopt when absent/unreadable.
std::optional<std::string> read_line(const fs::path& file);

// Names in a directory, sorted; empty when absent. Capped (hostile trees stay bounded).
std::vector<std::string> list_dir(const fs::path& dir);

// A path below root, relative ("sys/bus/pci/devices/X") or already prefixed by root, with every
// symlink resolved inside root. Returns the resolved path (prefixed by root) or nullopt when a
// link loops or a component is missing (a dangling link).
std::optional<fs::path> resolve(const fs::path& root, const fs::path& below_root);

// Integer parsing that rejects trailing garbage; accepts "0x" hex when base is 0.
std::optional<long> parse_long(std::string_view s, int base = 10);

// "0-55,112-167" -> the listed indexes. nullopt on malformed input or an absurd size.
std::optional<std::vector<std::uint32_t>> parse_cpulist(std::string_view s);

// sysfs current_link_speed ("16.0 GT/s PCIe", "8 GT/s", "Unknown") -> NCCL's form
// ("16.0 GT/s PCIe"); empty when unknown.
std::string pcie_speed(std::string_view sysfs_value);

// True for a PCI function address as sysfs names it: "0000:1b:00.0" (domain of 4+ hex digits).
bool is_busid(std::string_view s);

// A file's content as a note may quote it: at most 40 characters, non-printable ones as '?'.
std::string excerpt(std::string_view s);

// sysfs node_guid "b859:9f03:00d4:5a1c" -> "0xb8599f0300d45a1c"; empty when malformed.
std::string guid_from_sysfs(std::string_view s);

}  // namespace topoaware::topology::sysfs

// Input files as people actually save them, and which format each one is: the one place every
// reader of topo-aware (fabric and node) and every command gets its text and its format from.
//
// Admins hand over what their terminal produced: an ibnetdiscover dump saved from a session
// still has the shell prompt and command in front of it and a prompt line after it, a file that
// passed through Windows has a byte-order mark and CRLF line ends, a capture was gzipped to mail
// it. read_input() reads a file under a size bound (gunzipping gzip data), and clean_input()
// removes what terminals and editors add, keeping every line number: a skipped prompt line
// becomes an empty line, so an error still names the line of the file the user opens. What was
// skipped is returned as notes, which the loaders add to the model's notes (the user sees them in
// `fabric` and `discover` output and in the JSON).
//
// detect_format() names the format from signatures anywhere in the head of the text, never from
// the file name or from its first character alone; a format of the other kind (a node capture
// given as a fabric, nvidia-smi output, Slurm's topology.yaml or gres.conf) is refused with its
// reason, and text that matches nothing is refused naming the formats tried and how to force one.
// Every function throws topology::Error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::topology {

enum class InputFormat : std::uint8_t {
  kAuto,  // detect from content
  // Fabric descriptions (load_fabric).
  kIbnetdiscover,  // ibnetdiscover (or ibdiagnet's ibnetdiscover-format) dump
  kSlurmTopology,  // Slurm topology.conf, tree or block
  kFabricToml,     // topo-aware's TOML cluster description
  kFabricJson,     // topo-aware's fabric JSON (`fabric --of json`)
  kLingjunCsv,     // Alibaba Lingjun topology CSV (ip,DSW,PSW,ASW: one host a row)
  // Node captures (load_node_file).
  kHwlocXml,  // lstopo --of xml
  kNcclXml,   // NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE
};

// Which loader a file is for: the formats it takes, and the words of its messages.
enum class InputKind : std::uint8_t { kFabric, kNode };

// The name --format and the plugin config take: "ibnetdiscover", "slurm-topology", "toml",
// "json", "lingjun-csv", "hwloc-xml", "nccl-xml"; "auto" for kAuto.
std::string_view to_string(InputFormat format);

// The accepted names for `kind`, for help texts and errors: "auto, ibnetdiscover, ...".
std::string format_names(InputKind kind);

// A --format or config value to a format of `kind` ("auto" and "" give kAuto). Throws
// Error(kBadInput, context) listing the accepted names.
InputFormat parse_input_format(std::string_view name, InputKind kind, const std::string& context);

// Whether a format is read by the loader of `kind` (kAuto is, for both).
bool format_of_kind(InputFormat format, InputKind kind);

struct InputText {
  std::string text;                // BOM, CRLF and prompt lines removed; line numbers kept
  std::vector<std::string> notes;  // "PATH:1: skipped a shell prompt line ..." per change
};

// Reads `path` whole, refusing directories and anything larger than `max_bytes` (after
// gunzipping: gzip data is recognized by its magic bytes and inflated under the same bound),
// then cleans it with clean_input(). Throws Error(kNotFound, kSystem, kLimit, kBadInput).
InputText read_input(const std::string& path, std::uintmax_t max_bytes);

// Removes a UTF-8 byte-order mark, turns CRLF into LF, and blanks shell prompt lines (with the
// command they echo) before the first line of data and after the last one. `name` prefixes notes.
InputText clean_input(std::string text, const std::string& name);

// The format of cleaned `text` for a loader of `kind`, from signatures in its head. Throws
// Error(kUnsupported) for a known format this loader does not read (saying what to give
// instead), Error(kBadInput) for binary data, empty files and text that matches nothing.
InputFormat detect_format(std::string_view text, InputKind kind, const std::string& path);

}  // namespace topoaware::topology

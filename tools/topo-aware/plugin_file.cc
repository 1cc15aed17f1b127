// Reading a SPANK plugin's plugin_version from its ELF file (plugin_file.h).
#include "plugin_file.h"

#include <elf.h>

#include <bit>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "slurm_node.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

constexpr std::size_t kMaxPluginBytes = std::size_t{256} << 20;

// A struct at `offset` of `bytes`, copied (ELF offsets need not be aligned for us).
template <typename T>
T at(std::string_view bytes, std::uint64_t offset, const std::string& name, const char* what) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
    throw topology::Error(topology::ErrorCode::kBadInput, name,
                          std::string("truncated ELF file: ") + what + " lies past its end");
  }
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

}  // namespace

PluginFile parse_plugin_file(std::string_view bytes, const std::string& name) {
  using topology::Error;
  using topology::ErrorCode;
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
    throw Error(ErrorCode::kBadInput, name, "not an ELF file (a SPANK plugin is a shared object)");
  }
  if (bytes[EI_CLASS] != ELFCLASS64 || bytes[EI_DATA] != ELFDATA2LSB ||
      std::endian::native != std::endian::little) {
    throw Error(ErrorCode::kBadInput, name,
                "not a 64-bit little-endian ELF file (x86_64, aarch64): not read");
  }
  const auto eh = at<Elf64_Ehdr>(bytes, 0, name, "the ELF header");
  if (eh.e_type != ET_DYN) {
    throw Error(ErrorCode::kBadInput, name, "not a shared object (ELF type " +
                                                std::to_string(eh.e_type) + ")");
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096) {
    throw Error(ErrorCode::kBadInput, name, "no usable section headers");
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (std::size_t i = 0; i < sections.size(); ++i) {
    sections[i] = at<Elf64_Shdr>(bytes, eh.e_shoff + i * sizeof(Elf64_Shdr), name,
                                 "a section header");
  }
  for (const Elf64_Shdr& dynsym : sections) {
    if (dynsym.sh_type != SHT_DYNSYM || dynsym.sh_entsize != sizeof(Elf64_Sym)) continue;
    if (dynsym.sh_link >= sections.size()) break;
    const Elf64_Shdr& strtab = sections[dynsym.sh_link];
    const std::uint64_t count = dynsym.sh_size / sizeof(Elf64_Sym);
    for (std::uint64_t k = 0; k < count && k < (1u << 20); ++k) {
      const auto sym = at<Elf64_Sym>(bytes, dynsym.sh_offset + k * sizeof(Elf64_Sym), name,
                                     "a dynamic symbol");
      if (sym.st_name >= strtab.sh_size || strtab.sh_offset > bytes.size()) continue;
      const std::uint64_t str = strtab.sh_offset + sym.st_name;
      if (str >= bytes.size()) continue;
      const std::string_view rest = bytes.substr(str, strtab.sh_size - sym.st_name);
      if (rest.substr(0, rest.find('\0')) != "plugin_version") continue;
      if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_size != 4 ||
          sym.st_shndx == SHN_UNDEF || sym.st_shndx >= sections.size()) {
        throw Error(ErrorCode::kBadInput, name, "plugin_version is not a defined 4-byte object");
      }
      const Elf64_Shdr& home = sections[sym.st_shndx];
      if (home.sh_type == SHT_NOBITS || sym.st_value < home.sh_addr ||
          sym.st_value - home.sh_addr + 4 > home.sh_size) {
        throw Error(ErrorCode::kBadInput, name, "plugin_version lies outside its section");
      }
      PluginFile f;
      f.plugin_version = at<std::uint32_t>(bytes, home.sh_offset + (sym.st_value - home.sh_addr),
                                           name, "plugin_version");
      return f;
    }
  }
  throw Error(ErrorCode::kBadInput, name,
              "no plugin_version in its dynamic symbols: not a Slurm plugin");
}

PluginFile read_plugin_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw topology::Error(topology::ErrorCode::kNotFound, path, "cannot open the plugin file");
  }
  std::string bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    bytes.append(buf, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > kMaxPluginBytes) {
      throw topology::Error(topology::ErrorCode::kLimit, path,
                            "larger than 256 MiB: not a SPANK plugin");
    }
  }
  return parse_plugin_file(bytes, path);
}

std::optional<std::pair<topology::SlurmRelease, std::string>> installed_slurm_release() {
  for (const char* program : {"scontrol", "slurmd", "srun", "slurmctld"}) {
    const ProgramRun r = run_program({program, "-V"}, 5, /*quiet=*/true);
    if (!r.error.empty() || r.rc != 0) continue;
    if (auto v = topology::parse_slurm_release(r.out)) {
      return std::make_pair(*v, std::string(program) + " -V");
    }
  }
  return std::nullopt;
}

}  // namespace topoaware::cli

// A minimal ELF64 reader for cubins: enough to compare two cubins section by section.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ptxevo::evaluator {

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint32_t link = 0;
  std::uint32_t info = 0;
  std::uint64_t addralign = 0;
  std::uint64_t entsize = 0;
  std::vector<std::uint8_t> data;  // empty for SHT_NOBITS
  std::uint64_t size = 0;
};

// Throws std::runtime_error for a file that is not a well-formed little-endian ELF64.
std::vector<ElfSection> read_elf_sections(const std::vector<std::uint8_t>& image);

// Names the sections that differ between two cubins, skipping `ignored` sections, their
// relocation sections and their ".nv.merc" copies (sm_100 cubins). Empty when they match.
std::vector<std::string> diff_elf_sections(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                                           const std::set<std::string>& ignored);

}  // namespace ptxevo::evaluator

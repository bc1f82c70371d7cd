#include "evaluator/elf_sections.hpp"

#include <cstring>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {

template <class T>
T read_at(const std::vector<std::uint8_t>& b, std::uint64_t off) {
  if (off > b.size() || sizeof(T) > b.size() - off) throw std::runtime_error("ELF read past the end of the file");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

}  // namespace

std::vector<ElfSection> read_elf_sections(const std::vector<std::uint8_t>& b) {
  if (b.size() < 64 || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) throw std::runtime_error("not an ELF file");
  if (b[4] != 2 || b[5] != 1) throw std::runtime_error("not a little-endian ELF64 file");
  const auto shoff = read_at<std::uint64_t>(b, 0x28);
  const auto shentsize = read_at<std::uint16_t>(b, 0x3A);
  const auto shnum = read_at<std::uint16_t>(b, 0x3C);
  const auto shstrndx = read_at<std::uint16_t>(b, 0x3E);
  if (shentsize < 64) throw std::runtime_error("bad ELF section header size");
  std::vector<ElfSection> out(shnum);
  std::vector<std::uint32_t> name_off(shnum);
  std::vector<std::uint64_t> data_off(shnum);
  for (std::uint32_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + static_cast<std::uint64_t>(i) * shentsize;
    ElfSection& s = out[i];
    name_off[i] = read_at<std::uint32_t>(b, h);
    s.type = read_at<std::uint32_t>(b, h + 4);
    s.flags = read_at<std::uint64_t>(b, h + 8);
    data_off[i] = read_at<std::uint64_t>(b, h + 24);
    s.size = read_at<std::uint64_t>(b, h + 32);
    s.link = read_at<std::uint32_t>(b, h + 40);
    s.info = read_at<std::uint32_t>(b, h + 44);
    s.addralign = read_at<std::uint64_t>(b, h + 48);
    s.entsize = read_at<std::uint64_t>(b, h + 56);
    constexpr std::uint32_t kNoBits = 8;
    if (s.type != kNoBits && s.size > 0) {
      if (data_off[i] > b.size() || s.size > b.size() - data_off[i])
        throw std::runtime_error("ELF section data past the end of the file");
      s.data.assign(b.begin() + static_cast<std::ptrdiff_t>(data_off[i]),
                    b.begin() + static_cast<std::ptrdiff_t>(data_off[i] + s.size));
    }
  }
  if (shstrndx >= shnum) throw std::runtime_error("bad ELF section name table index");
  const auto& names = out[shstrndx].data;
  for (std::uint32_t i = 0; i < shnum; ++i) {
    if (name_off[i] >= names.size() && !(i == 0 && name_off[i] == 0)) throw std::runtime_error("bad ELF section name");
    if (name_off[i] < names.size()) {
      const char* p = reinterpret_cast<const char*>(names.data()) + name_off[i];
      out[i].name.assign(p, strnlen(p, names.size() - name_off[i]));
    }
  }
  return out;
}

std::vector<std::string> diff_elf_sections(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                                           const std::set<std::string>& ignored) {
  const auto sa = read_elf_sections(a);
  const auto sb = read_elf_sections(b);
  // Blackwell cubins carry a second copy of some sections under the ".nv.merc" prefix, and a
  // relocation section is named after the section it patches (".rela" + name).
  auto base_name = [](std::string n) {
    if (n.rfind(".nv.merc", 0) == 0) n = n.substr(8);
    if (n.rfind(".rela", 0) == 0) n = n.substr(5);
    else if (n.rfind(".rel", 0) == 0) n = n.substr(4);
    return n;
  };
  auto skipped = [&](const std::vector<ElfSection>& s, std::size_t i) {
    if (ignored.count(s[i].name) || ignored.count(base_name(s[i].name))) return true;
    constexpr std::uint32_t kRela = 4, kRel = 9;
    // A relocation section's sh_info names the section it patches.
    if ((s[i].type == kRela || s[i].type == kRel) && s[i].info < s.size() && ignored.count(s[s[i].info].name))
      return true;
    return false;
  };
  std::vector<std::string> diffs;
  if (sa.size() != sb.size()) {
    diffs.push_back("section count " + std::to_string(sa.size()) + " vs " + std::to_string(sb.size()));
    return diffs;
  }
  for (std::size_t i = 0; i < sa.size(); ++i) {
    if (sa[i].name != sb[i].name) {
      diffs.push_back("section " + std::to_string(i) + " is '" + sa[i].name + "' vs '" + sb[i].name + "'");
      continue;
    }
    if (skipped(sa, i)) continue;
    const auto& x = sa[i];
    const auto& y = sb[i];
    if (x.type != y.type || x.flags != y.flags || x.link != y.link || x.info != y.info ||
        x.addralign != y.addralign || x.entsize != y.entsize || x.size != y.size || x.data != y.data)
      diffs.push_back(x.name.empty() ? "section " + std::to_string(i) : x.name);
  }
  return diffs;
}

}  // namespace ptxevo::evaluator

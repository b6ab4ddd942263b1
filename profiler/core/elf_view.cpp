#include "core/elf_view.hpp"

#include <cstring>

#include "common/error.hpp"

namespace kopt::harness {
namespace {

// Standard ELF64 layouts (not <elf.h>, so that every read goes through the
// one bounds check below).
struct ehdr {
  unsigned char ident[16];
  std::uint16_t type, machine;
  std::uint32_t version;
  std::uint64_t entry, phoff, shoff;
  std::uint32_t flags;
  std::uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};
struct shdr {
  std::uint32_t name, type;
  std::uint64_t flags, addr, offset, size;
  std::uint32_t link, info;
  std::uint64_t addralign, entsize;
};
struct sym {
  std::uint32_t name;
  unsigned char info, other;
  std::uint16_t shndx;
  std::uint64_t value, size;
};
constexpr std::uint32_t sht_symtab = 2;

template <typename T>
T read_at(std::string_view b, std::uint64_t off) {
  if (off > b.size() || b.size() - off < sizeof(T)) throw kopt::error("cubin: truncated ELF");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

std::string cstr_at(std::string_view b, std::uint64_t off) {
  if (off >= b.size()) throw kopt::error("cubin: string offset out of range");
  const auto end = b.find('\0', off);
  if (end == std::string_view::npos) throw kopt::error("cubin: unterminated string");
  return std::string(b.substr(off, end - off));
}

}  // namespace

elf_view::elf_view(std::string_view b) : image_(b) {
  const auto h = read_at<ehdr>(b, 0);
  if (std::memcmp(h.ident,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      h.ident[4] != 2 || h.ident[5] != 1)
    throw kopt::error("cubin: not a 64-bit little-endian ELF image");
  if (h.shentsize != sizeof(shdr)) throw kopt::error("cubin: unexpected section header size");
  flags_ = h.flags;
  std::vector<shdr> raw;
  for (std::uint16_t i = 0; i < h.shnum; ++i)
    raw.push_back(read_at<shdr>(b, h.shoff + std::uint64_t{i} * sizeof(shdr)));
  if (h.shstrndx >= raw.size()) throw kopt::error("cubin: bad section name table index");
  const auto& names = raw[h.shstrndx];
  for (const auto& s : raw) {
    elf_section e;
    e.name = cstr_at(b, names.offset + s.name);
    e.type = s.type;
    e.flags = s.flags;
    e.offset = s.offset;
    e.size = s.size;
    if (e.has_file_bytes() && (e.offset > b.size() || b.size() - e.offset < e.size))
      throw kopt::error("cubin: section '" + e.name + "' lies outside the image");
    sections_.push_back(std::move(e));
  }
  for (const auto& s : raw) {
    if (s.type != sht_symtab) continue;
    if (s.link >= raw.size()) throw kopt::error("cubin: bad symbol string table link");
    const auto& strtab = raw[s.link];
    const std::uint64_t count = s.entsize ? s.size / s.entsize : 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto e = read_at<sym>(b, s.offset + i * sizeof(sym));
      elf_symbol y;
      y.name = cstr_at(b, strtab.offset + e.name);
      y.type = e.info & 0xF;
      y.bind = e.info >> 4;
      y.section = e.shndx;
      y.value = e.value;
      y.size = e.size;
      symbols_.push_back(std::move(y));
    }
  }
}

std::string_view elf_view::bytes(const elf_section& s) const {
  if (!s.has_file_bytes()) return {};
  return image_.substr(s.offset, s.size);  // bounds checked in the constructor
}

std::string_view elf_view::bytes(const elf_symbol& y) const {
  if (y.section == 0 || y.section >= sections_.size()) return {};
  const auto& s = sections_[y.section];
  if (y.value > s.size || s.size - y.value < y.size)
    throw kopt::error("cubin: symbol '" + y.name + "' lies outside its section");
  if (!s.has_file_bytes()) return {};
  return image_.substr(s.offset + y.value, y.size);
}

}  // namespace kopt::harness

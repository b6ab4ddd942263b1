#include "core/cubin_inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "core/cubin_rules.hpp"
#include "core/elf_view.hpp"

namespace kopt::harness {
namespace {

// Minimal ELF64 structures (we avoid <elf.h> only to keep the bounds checks
// in one place; the layouts are the standard ones).
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
constexpr unsigned char stt_func = 2;
constexpr std::uint16_t shn_undef = 0;

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

cubin_facts inspect_cubin(std::string_view b) {
  const auto h = read_at<ehdr>(b, 0);
  if (std::memcmp(h.ident, "\x7f" "ELF", 4) != 0 || h.ident[4] != 2 || h.ident[5] != 1)
    throw kopt::error("cubin: not a 64-bit little-endian ELF image");
  if (h.shentsize != sizeof(shdr)) throw kopt::error("cubin: unexpected section header size");
  std::vector<shdr> sections;
  for (std::uint16_t i = 0; i < h.shnum; ++i)
    sections.push_back(read_at<shdr>(b, h.shoff + std::uint64_t{i} * sizeof(shdr)));
  if (h.shstrndx >= sections.size()) throw kopt::error("cubin: bad section name table index");
  const auto& names = sections[h.shstrndx];
  std::vector<std::string> section_names;
  for (const auto& s : sections) section_names.push_back(cstr_at(b, names.offset + s.name));

  cubin_facts f;
  for (const auto& s : sections) {
    if (s.type != sht_symtab) continue;
    if (s.link >= sections.size()) throw kopt::error("cubin: bad symbol string table link");
    const auto& strtab = sections[s.link];
    const std::uint64_t count = s.entsize ? s.size / s.entsize : 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto e = read_at<sym>(b, s.offset + i * sizeof(sym));
      const unsigned char type = e.info & 0xF;
      const std::string name = cstr_at(b, strtab.offset + e.name);
      if (name.empty()) continue;
      if (e.shndx == shn_undef) {
        if (type == stt_func) f.undefined_functions.push_back(name);
        continue;
      }
      if (e.shndx >= section_names.size()) continue;  // special indices
      const std::string& sec = section_names[e.shndx];
      if (type == stt_func && sec.rfind(".text.", 0) == 0 && (e.info >> 4) == 1 /*GLOBAL*/)
        f.kernels.push_back(name);
    }
  }
  // Writable state and clock reads: decided by section flags and machine
  // code, never by names (core/cubin_rules.hpp).
  const elf_view elf(b);
  auto data = check_data_sections(elf);
  f.writable_globals = std::move(data.refused_symbols);
  f.data_problems = std::move(data.problems);
  f.exempt_tables = std::move(data.exempt_tables);
  f.module_data_symbols = std::move(data.module_data_symbols);
  f.clock_reads = find_clock_reads_sass(elf);
  for (auto* v : {&f.kernels, &f.writable_globals, &f.undefined_functions}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return f;
}

std::vector<std::string> cubin_facts::problems() const {
  std::vector<std::string> p = data_problems;
  for (const auto& fn : undefined_functions) {
    // Device assert traps on failure, which the harness records as a crash
    // (its message strings are string literals, refused by the data rule).
    if (fn == "__assertfail") continue;
    if (fn == "malloc" || fn == "free" || fn.find("malloc") != std::string::npos)
      p.push_back(fmt::format("device-side memory allocation ('{}') is not allowed: declare a workspace", fn));
    else if (fn == "vprintf")
      p.push_back("device printf is not allowed in candidates");
    else
      p.push_back(fmt::format("the kernel calls an external device function '{}', which kopt does not link", fn));
  }
  return p;
}

}  // namespace kopt::harness

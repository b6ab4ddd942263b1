// A bounds-checked read-only view of a 64-bit little-endian ELF image (a
// cubin): its section headers (name, type, flags, file range) and the
// symbols of its symbol tables. Every offset is checked against the image,
// so damaged or hostile bytes raise kopt::error, never read out of bounds.
// Used by the integrity rules that decide by section flags and by machine
// code (core/cubin_rules.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::harness {

struct elf_section {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t offset = 0, size = 0;
  bool has_file_bytes() const { return type != 8 /*SHT_NOBITS*/; }
  bool writable() const { return (flags & 0x1) != 0; }    // SHF_WRITE
  bool allocated() const { return (flags & 0x2) != 0; }   // SHF_ALLOC
  bool executable() const { return (flags & 0x4) != 0; }  // SHF_EXECINSTR
};

struct elf_symbol {
  std::string name;
  unsigned char type = 0;     // STT_*: 1 object, 2 function
  unsigned char bind = 0;     // STB_*: 0 local, 1 global, 2 weak
  std::uint16_t section = 0;  // index; 0 = undefined, >= 0xff00 special
  std::uint64_t value = 0, size = 0;
};

class elf_view {
 public:
  // Throws kopt::error when the bytes are not a well-formed ELF64 LE image.
  explicit elf_view(std::string_view image);
  const std::vector<elf_section>& sections() const { return sections_; }
  const std::vector<elf_symbol>& symbols() const { return symbols_; }
  std::uint32_t machine_flags() const { return flags_; }
  // The file bytes of a section (empty for NOBITS).
  std::string_view bytes(const elf_section& s) const;
  // The file bytes of an object symbol inside its section; empty when the
  // section has none (NOBITS); throws when the symbol lies outside it.
  std::string_view bytes(const elf_symbol& s) const;

 private:
  std::string_view image_;
  std::vector<elf_section> sections_;
  std::vector<elf_symbol> symbols_;
  std::uint32_t flags_ = 0;
};

}  // namespace kopt::harness
